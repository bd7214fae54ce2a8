//! Focused tests for recovery-profile scenarios whose every assertion the older settlement
//! tests did not pin: the bytes of the expiry fallback event on the wire (CR-CORE-002), a
//! protocol-invalid success that must stay ambiguous with its record and key (CR-CORE-004),
//! and journal file names for arbitrary identifiers (CR-DURABLE-007).

mod common;

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::store::TestJournal;
use common::*;
use cycles_core::journal::{names, Journal, Record};
use cycles_core::*;
use cycles_local_server::{Fault, FaultRule, LocalServer, Malformed, Operation};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

type Buf = Arc<Mutex<Vec<u8>>>;

/// A loopback TCP proxy in front of the local server that keeps a copy of every byte the
/// client sent, per connection, so tests can read the exact request bodies.
struct Tee {
    url: String,
    conns: Arc<Mutex<Vec<Buf>>>,
}

impl Tee {
    async fn start(upstream: SocketAddr) -> Tee {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let conns: Arc<Mutex<Vec<Buf>>> = Arc::default();
        let all = conns.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(up) = TcpStream::connect(upstream).await else {
                    continue;
                };
                let buf = Buf::default();
                all.lock().unwrap().push(buf.clone());
                let (mut cr, mut cw) = client.into_split();
                let (mut ur, mut uw) = up.into_split();
                tokio::spawn(async move {
                    let mut b = [0u8; 8192];
                    loop {
                        match cr.read(&mut b).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => {
                                buf.lock().unwrap().extend_from_slice(&b[..n]);
                                if uw.write_all(&b[..n]).await.is_err() {
                                    break;
                                }
                            }
                        }
                    }
                    let _ = uw.shutdown().await;
                });
                tokio::spawn(async move {
                    let _ = tokio::io::copy(&mut ur, &mut cw).await;
                    let _ = cw.shutdown().await;
                });
            }
        });
        Tee { url, conns }
    }

    /// Every complete request seen: (request line, JSON body or Null).
    fn requests(&self) -> Vec<(String, Value)> {
        let mut out = Vec::new();
        for buf in self.conns.lock().unwrap().iter() {
            let bytes = buf.lock().unwrap().clone();
            let mut rest = &bytes[..];
            while let Some(end) = rest.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&rest[..end]).to_string();
                let len = head
                    .lines()
                    .find_map(|l| {
                        let (n, v) = l.split_once(':')?;
                        n.trim()
                            .eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse::<usize>().ok())?
                    })
                    .unwrap_or(0);
                let body_start = end + 4;
                if rest.len() < body_start + len {
                    break;
                }
                let body = serde_json::from_slice(&rest[body_start..body_start + len])
                    .unwrap_or(Value::Null);
                out.push((head.lines().next().unwrap_or("").to_string(), body));
                rest = &rest[body_start + len..];
            }
        }
        out
    }
}

/// A configuration on the journal under test (the directory, or Redis: `common::store`).
fn config_on(url: &str, j: &TestJournal) -> Config {
    j.configure(Config::new(url, KEY).with_request_timeout(Duration::from_secs(5)))
}

fn settings() -> SettleConfig {
    SettleConfig {
        backoff_base: Duration::from_millis(10),
        backoff_cap: Duration::from_millis(100),
        ..SettleConfig::default()
    }
}

fn settlement(id: &str, key: &str, amount: i64) -> Settlement {
    let mut commit = CommitRequest::new(key, usd(amount));
    let mut meta = Metadata::new();
    meta.insert("run".into(), "r-7".into());
    commit.metadata = Some(meta.into());
    Settlement {
        reservation_id: id.to_string(),
        commit,
        fallback: Some(EventFallback {
            subject: subject(),
            action: action(),
            overage_policy: None,
        }),
    }
}

fn settle_reqs(server: &LocalServer) -> Vec<cycles_local_server::RequestRecord> {
    server
        .requests()
        .into_iter()
        .filter(|r| {
            matches!(
                r.operation,
                Some(Operation::CommitReservation | Operation::CreateEvent)
            )
        })
        .collect()
}

fn count(server: &LocalServer, kind: &str) -> usize {
    server.ledger().iter().filter(|e| e.kind == kind).count()
}

// ---------------------------------------------------------------------------------------------
// CR-CORE-002

/// CR-CORE-002: commit -> 410 -> one event with the commit's key, carrying the reservation's
/// original subject and action and the known actual, as read from the bytes on the wire; the
/// ledger holds that one event and no commit.
#[tokio::test]
async fn expired_commit_falls_back_to_one_event_with_the_original_subject_action_and_actual() {
    let server = server().await;
    let tmp = tempfile::tempdir().unwrap();
    let j = TestJournal::new(tmp.path().join("journal"));
    let id = reserve(&client(&server), 1000).await;
    server.advance_clock(200_000); // past expires_at + grace
    let tee = Tee::start(server.addr()).await;
    let s = Settler::new(&config_on(&tee.url, &j), settings()).unwrap();
    let key = key("commit");
    let out = s.settle(settlement(&id, &key, 400)).await;
    assert!(
        matches!(out, SettleOutcome::RecoveredViaEvent(_)),
        "{out:?}"
    );

    // Choreography at the server: commit (410), then event (201), one key.
    let reqs = settle_reqs(&server);
    let seen: Vec<_> = reqs.iter().map(|r| (r.operation, r.status)).collect();
    assert_eq!(
        seen,
        [
            (Some(Operation::CommitReservation), Some(410)),
            (Some(Operation::CreateEvent), Some(201)),
        ]
    );
    assert!(reqs
        .iter()
        .all(|r| r.idempotency_key.as_deref() == Some(key.as_str())));

    // The bytes sent.
    let wire = tee.requests();
    let commit = &wire
        .iter()
        .find(|(l, _)| l.starts_with(&format!("POST /v1/reservations/{id}/commit ")))
        .expect("commit on the wire")
        .1;
    let event = &wire
        .iter()
        .find(|(l, _)| l.starts_with("POST /v1/events "))
        .expect("event on the wire")
        .1;
    let actual = json!({"unit": "USD_MICROCENTS", "amount": 400});
    assert_eq!(commit["idempotency_key"], key.as_str());
    assert_eq!(commit["actual"], actual);
    assert_eq!(event["idempotency_key"], key.as_str(), "event_same_key");
    assert_eq!(event["subject"], serde_json::to_value(subject()).unwrap());
    assert_eq!(event["subject"], json!({"tenant": "acme"}));
    assert_eq!(event["action"], serde_json::to_value(action()).unwrap());
    assert_eq!(event["action"]["kind"], "llm.completion");
    assert_eq!(event["action"]["name"], "test-model");
    assert_eq!(event["actual"], actual, "the known actual, unchanged");
    assert_eq!(event["metadata"]["run"], "r-7");
    assert_eq!(event["metadata"]["recovered_reservation_id"], id.as_str());
    assert_eq!(
        event["metadata"]["recovery_reason"],
        "commit_after_reservation_expired"
    );

    // Settled once: one event with the actual, no commit; the record is gone.
    let events: Vec<_> = server
        .ledger()
        .into_iter()
        .filter(|e| e.kind == "event")
        .collect();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].idempotency_key, key);
    assert_eq!(
        (events[0].unit.as_deref(), events[0].amount),
        (Some("USD_MICROCENTS"), Some(400))
    );
    assert_eq!(count(&server, "commit"), 0);
    assert!(j.records().is_empty());
    assert!(j.dir_untouched_on_redis());
}

// ---------------------------------------------------------------------------------------------
// CR-CORE-004

/// CR-CORE-004: every protocol-invalid "success" (missing field, 202, non-JSON, mistyped
/// field) on a commit that the server DID apply is not terminal: the outcome is pending, the
/// record stays with the original key; the retry (a fresh engine) uses that key, and only the
/// schema-valid 200 ends it. Same for the fallback event (201 expected).
#[tokio::test]
async fn protocol_invalid_success_stays_ambiguous_with_its_record_and_key() {
    for shape in [
        Malformed::MissingRequiredField,
        Malformed::WrongStatusCode,
        Malformed::NotJson,
        Malformed::WrongFieldType,
    ] {
        for via_event in [false, true] {
            let what = format!("{shape:?} via_event={via_event}");
            let server = server().await;
            let tmp = tempfile::tempdir().unwrap();
            let j = TestJournal::new(tmp.path().join("journal"));
            let id = reserve(&client(&server), 1000).await;
            let op = if via_event {
                server.advance_clock(200_000);
                Operation::CreateEvent
            } else {
                Operation::CommitReservation
            };
            server.add_fault(FaultRule {
                operation: op,
                reservation_id: None,
                skip: 0,
                times: 1,
                every: 1,
                fault: Fault::MalformedSuccess { shape },
            });
            let key = key("commit");
            let one_try = Settler::new(
                &config_on(&server.url(), &j),
                SettleConfig {
                    max_attempts: if via_event { 2 } else { 1 },
                    ..settings()
                },
            )
            .unwrap();
            let out = one_try.settle(settlement(&id, &key, 400)).await;
            assert!(out.is_pending(), "{what}: not a success: {out:?}");
            drop(one_try);
            // Applied by the server, yet the record stays, with the original key.
            let kind = if via_event { "event" } else { "commit" };
            assert_eq!(count(&server, kind), 1, "{what}");
            let records = j.records();
            assert_eq!(records.len(), 1, "{what}: record retained");
            let rec = Record::parse(&records[0].2).unwrap();
            assert_eq!(
                rec.idempotency_key().as_deref(),
                Some(key.as_str()),
                "{what}"
            );
            assert_eq!(
                rec.mode,
                if via_event { Mode::Event } else { Mode::Commit },
                "{what}"
            );

            let fresh = Settler::new(&config_on(&server.url(), &j), settings()).unwrap();
            let report = fresh.flush().await;
            assert_eq!(report.settled(), 1, "{what}: {report:?}");
            assert!(j.records().is_empty(), "{what}");
            let reqs: Vec<_> = settle_reqs(&server)
                .into_iter()
                .filter(|r| r.operation == Some(op))
                .collect();
            assert_eq!(reqs.len(), 2, "{what}: {reqs:?}");
            assert!(reqs
                .iter()
                .all(|r| r.idempotency_key.as_deref() == Some(key.as_str())));
            assert_eq!(
                reqs[0].fault.as_deref(),
                Some("malformed_success"),
                "{what}"
            );
            assert_eq!(
                reqs[1].status,
                Some(if via_event { 201 } else { 200 }),
                "{what}"
            );
            assert!(reqs[1].replay, "{what}: the retry got the original result");
            assert_eq!(count(&server, kind), 1, "{what}: settled once");
            assert_eq!(count(&server, "commit") + count(&server, "event"), 1);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// CR-DURABLE-007

/// CR-DURABLE-007: the standard file name is `v2-<sha256 lower hex of the exact UTF-8 id>.json`
/// (computed here independently), distinct ids never share a file (each record reads back as
/// its own), and a legacy file migrates only for the id stored in it: a colliding id neither
/// reads nor deletes it.
#[test]
fn journal_file_names_are_sha256_of_the_exact_id_and_never_shared() {
    let tmp = tempfile::tempdir().unwrap();
    let j = Journal::new(tmp.path(), "http://127.0.0.1:1", KEY, None);
    j.ensure_dir().unwrap();
    let ids = tricky_ids();
    let mut files = HashSet::new();
    for id in &ids {
        let expected = format!("v2-{}.json", hex::encode(Sha256::digest(id.as_bytes())));
        assert_eq!(names::record_file_name(id), expected, "{id:?}");
        assert_eq!(
            j.path_of(id).file_name().unwrap().to_str().unwrap(),
            expected
        );
        assert!(expected[3..67]
            .chars()
            .all(|c| matches!(c, '0'..='9' | 'a'..='f')));
        files.insert(expected);
    }
    assert_eq!(
        files.len(),
        ids.len(),
        "distinct identifiers, distinct files"
    );

    // Every id gets its own record; each reads back as itself.
    let body = |k: &str| {
        serde_json::value::RawValue::from_string(format!(
            r#"{{"idempotency_key":"{k}","actual":{{"unit":"USD_MICROCENTS","amount":1}}}}"#
        ))
        .unwrap()
    };
    for (n, id) in ids.iter().enumerate() {
        let lock = j.try_lock(id).unwrap().unwrap();
        let mut rec = Record::new_commit(id.clone(), j.base_url(), body(&format!("k{n}")), None);
        j.save(&lock, &mut rec).unwrap();
    }
    for (n, id) in ids.iter().enumerate() {
        let lock = j.try_lock(id).unwrap().unwrap();
        let rec = j.load(&lock, id).unwrap().unwrap().unwrap();
        assert_eq!(&rec.reservation_id, id);
        assert_eq!(rec.idempotency_key(), Some(format!("k{n}")));
    }
    assert_eq!(j.scan().unwrap().records.len(), ids.len());

    // Legacy: `rsv/b` and `rsv_b` share the legacy name `rsv_b.json`, which holds `rsv/b`.
    assert_eq!(
        names::legacy_file_name("rsv/b"),
        names::legacy_file_name("rsv_b")
    );
    let legacy = j.dir().join(names::legacy_file_name("rsv/b"));
    let stored = Record::new_commit("rsv/b", j.base_url(), body("legacy"), None);
    std::fs::write(&legacy, stored.to_json()).unwrap();
    // The colliding id neither reads nor deletes it.
    let lock = j.try_lock("rsv_b").unwrap().unwrap();
    assert!(j.load(&lock, "rsv_b").unwrap().is_none());
    assert!(!j.remove(&lock, "rsv_b").unwrap_or(false));
    drop(lock);
    assert!(legacy.exists(), "a colliding legacy file is never deleted");
    assert!(!j.path_of("rsv_b").exists());
    // The matching id migrates it to its standard name, then the legacy file goes.
    let lock = j.try_lock("rsv/b").unwrap().unwrap();
    let rec = j.load(&lock, "rsv/b").unwrap().unwrap().unwrap();
    drop(lock);
    assert_eq!(rec.reservation_id, "rsv/b");
    assert_eq!(rec.idempotency_key().as_deref(), Some("legacy"));
    assert!(!legacy.exists());
    let migrated = std::fs::read(j.path_of("rsv/b")).unwrap();
    assert_eq!(
        Record::parse(&migrated).unwrap().reservation_id,
        "rsv/b",
        "migrated to v2-sha256(\"rsv/b\")"
    );
}
