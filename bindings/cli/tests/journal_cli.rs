//! `cycles journal` as an operator runs it: a real journal directory with a pending record
//! written by the settlement engine, drained by the `cycles` process against the local server.

use std::process::Command;
use std::sync::Arc;

use cycles_core::settle::{SettleConfig, SettleOutcome, Settlement, Settler};
use cycles_core::*;
use cycles_local_server::{Fault, FaultRule, LocalServer, Operation, ServerConfig};

const KEY: &str = "cycles-local-key";

/// Runs `cycles` with `args`: (exit status, stdout as JSON, stdout and stderr).
async fn cycles(args: Vec<String>) -> (i32, serde_json::Value, String) {
    tokio::task::spawn_blocking(move || {
        let out = Command::new(env!("CARGO_BIN_EXE_cycles"))
            .args(&args)
            .output()
            .expect("run cycles");
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        let json = serde_json::from_str(&stdout).unwrap_or(serde_json::Value::Null);
        (
            out.status.code().unwrap_or(-1),
            json,
            format!("{stdout}{}", String::from_utf8_lossy(&out.stderr)),
        )
    })
    .await
    .unwrap()
}

/// Reserves under `key` and settles once while every commit fails (503, one attempt): the
/// settlement is left pending in `config`'s journal. Its reservation id.
async fn leave_pending(server: &LocalServer, config: &Config, key: &str) -> String {
    let client = Arc::new(CyclesClient::new(config.clone()).unwrap());
    let created = client
        .create_reservation(&ReservationCreateRequest::new(
            key,
            Subject::tenant("acme"),
            Action::new("llm.completion", "m"),
            Amount::new(Unit::UsdMicrocents, 1000),
        ))
        .await
        .unwrap();
    let id = created.body.reservation_id.clone().unwrap();
    server.add_fault(FaultRule {
        operation: Operation::CommitReservation,
        reservation_id: None,
        skip: 0,
        times: 0,
        every: 1,
        fault: Fault::ServerError { status: 503 },
    });
    let settler = Settler::new(
        config,
        SettleConfig {
            max_attempts: 1,
            ..SettleConfig::default()
        },
    )
    .unwrap();
    let outcome = settler
        .settle(Settlement {
            reservation_id: id.clone(),
            commit: CommitRequest::new(
                format!("{key}:commit"),
                Amount::new(Unit::UsdMicrocents, 600),
            ),
            fallback: None,
        })
        .await;
    assert!(
        matches!(
            outcome,
            SettleOutcome::Pending {
                journaled: true,
                ..
            }
        ),
        "{outcome:?}"
    );
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_drain_and_quarantine_a_real_journal() {
    let server = LocalServer::start(ServerConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_string_lossy().to_string();
    let config = Config::new(server.url(), KEY).with_journal_dir(dir.path());
    let id = leave_pending(&server, &config, "ops-1").await;

    // list: the operator sees what is pending, for which server, in which mode.
    let (code, json, text) = cycles(vec![
        "journal".into(),
        "list".into(),
        "--dir".into(),
        d.clone(),
        "--json".into(),
    ])
    .await;
    assert_eq!(code, 0, "{text}");
    let pending = json["pending"].as_array().expect("pending list");
    assert_eq!(pending.len(), 1, "{json}");
    assert_eq!(pending[0]["reservation_id"], id.as_str());
    assert!(
        text.contains(&server.url()),
        "the record names its server: {text}"
    );
    assert!(!text.contains(KEY), "the API key is never shown");
    assert_eq!(json["exists"], true, "{json}");

    // A directory that does not exist is said so, not just "0 pending".
    let missing = dir
        .path()
        .join("no-such-dir")
        .to_string_lossy()
        .into_owned();
    let (code, _, text) = cycles(vec![
        "journal".into(),
        "list".into(),
        "--dir".into(),
        missing,
    ])
    .await;
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("0 pending") && text.contains("no such directory"),
        "{text}"
    );

    // A corrupt file beside it is quarantined by the next pass, not fatal.
    let partition = std::fs::read_dir(dir.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::write(
        partition.join(format!("v2-{}.json", "0".repeat(64))),
        b"{not json",
    )
    .unwrap();

    // drain: the server is back; the record settles once and leaves the journal.
    server.clear_faults();
    let args = [
        "journal",
        "drain",
        "--dir",
        &d,
        "--base-url",
        &server.url(),
        "--api-key",
        KEY,
        "--deadline-ms",
        "5000",
        "--json",
    ];
    let (code, json, text) = cycles(args.iter().map(|s| s.to_string()).collect()).await;
    // The record settled, but a file was quarantined: that is exit status 3, and said.
    assert_eq!(code, 3, "drain: {text}");
    assert_eq!(json["settled"], 1, "{json}");
    assert_eq!(
        json["quarantined"].as_array().map(Vec::len),
        Some(1),
        "{json}"
    );
    assert!(text.contains("quarantined during this run"), "{text}");
    assert_eq!(
        server
            .ledger()
            .iter()
            .filter(|e| e.kind == "commit")
            .count(),
        1
    );
    let (_, json, _) = cycles(vec![
        "journal".into(),
        "list".into(),
        "--dir".into(),
        d.clone(),
        "--json".into(),
    ])
    .await;
    assert_eq!(json["pending"].as_array().map(Vec::len), Some(0), "{json}");

    let (code, json, text) = cycles(vec![
        "journal".into(),
        "quarantine".into(),
        "--dir".into(),
        d.clone(),
        "--json".into(),
    ])
    .await;
    assert_eq!(code, 0, "{text}");
    assert_eq!(
        json["quarantined"].as_array().map(Vec::len),
        Some(1),
        "{json}"
    );
}

/// A record the TypeScript SDK writes for a metadata string cut inside a surrogate pair
/// (`"ab\ud800"`, the vectors' fixture byte for byte) is listed as pending, not invalid, and
/// `drain` settles it once with exit status 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_surrogate_record_is_listed_and_drained() {
    let vectors: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../conformance/vectors/journal.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let case = vectors["records"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "typescript_lone_surrogate_commit_mode")
        .unwrap();
    let server = LocalServer::start(ServerConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_string_lossy().to_string();
    let client = CyclesClient::new(Config::new(server.url(), KEY)).unwrap();
    let id = client
        .create_reservation(&ReservationCreateRequest::new(
            "ts-lone",
            Subject::tenant("acme"),
            Action::new("llm.completion", "m"),
            Amount::new(Unit::UsdMicrocents, 1000),
        ))
        .await
        .unwrap()
        .body
        .reservation_id
        .unwrap();
    let text = case["text"]
        .as_str()
        .unwrap()
        .replace("\"rsv-ts-lone-commit\"", &format!("\"{id}\""))
        .replace("\"http://localhost\"", &format!("\"{}\"", server.url()));
    let part = dir
        .path()
        .join(journal::identity::partition(&server.url(), KEY, None));
    std::fs::create_dir_all(&part).unwrap();
    std::fs::write(part.join(journal::names::record_file_name(&id)), &text).unwrap();

    let (code, json, text) = cycles(
        ["journal", "list", "--dir", &d, "--json"]
            .iter()
            .map(|s| s.to_string())
            .collect(),
    )
    .await;
    assert_eq!(code, 0, "{text}");
    assert_eq!(json["pending"].as_array().map(Vec::len), Some(1), "{json}");
    assert_eq!(json["pending"][0]["actual"]["amount"], 400, "{json}");
    assert_eq!(json["invalid"].as_array().map(Vec::len), Some(0), "{json}");
    let url = server.url();
    let args = [
        "journal",
        "drain",
        "--dir",
        &d,
        "--base-url",
        &url,
        "--api-key",
        KEY,
        "--json",
    ];
    let (code, json, text) = cycles(args.iter().map(|s| s.to_string()).collect()).await;
    assert_eq!(code, 0, "{text}");
    assert_eq!(json["settled"], 1, "{json}");
    let commits: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.idempotency_key.as_deref() == Some("ts-lone-commit"))
        .collect();
    assert_eq!(commits.len(), 1);
    assert_eq!(
        commits[0].body.as_deref(),
        case["expect"]["commit_body_wire"].as_str()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_moves_a_journal_into_redis_and_back() {
    let data = tempfile::tempdir().unwrap();
    let redis = cycles_test_redis::RedisServer::start(data.path(), true).unwrap();
    let url = redis.url();
    let src = tempfile::tempdir().unwrap();
    let j = cycles_core::journal::Journal::new(src.path(), "http://127.0.0.1:9", KEY, None);
    let lock = j.try_lock("rsv-ops").unwrap().unwrap();
    let body = serde_json::value::RawValue::from_string(
        r#"{"idempotency_key":"k","actual":{"unit":"USD_MICROCENTS","amount":5}}"#.into(),
    )
    .unwrap();
    let mut rec =
        cycles_core::journal::Record::new_commit("rsv-ops", "http://127.0.0.1:9", body, None);
    j.save(&lock, &mut rec).unwrap();
    drop(lock);
    let bytes = std::fs::read(j.path_of("rsv-ops")).unwrap();
    let s = src.path().to_string_lossy().to_string();

    let (code, json, text) = cycles(
        [
            "journal", "copy", "--from", &s, "--to", &url, "--move", "--json",
        ]
        .map(String::from)
        .to_vec(),
    )
    .await;
    assert_eq!(code, 0, "{text}");
    assert_eq!(json["records"][0]["reservation_id"], "rsv-ops", "{json}");
    assert_eq!(json["records"][0]["outcome"], "moved", "{json}");
    assert!(!j.path_of("rsv-ops").exists(), "moved out of the directory");

    let back = tempfile::tempdir().unwrap();
    let b = back.path().to_string_lossy().to_string();
    let (code, _, text) = cycles(
        ["journal", "copy", "--from", &url, "--to", &b]
            .map(String::from)
            .to_vec(),
    )
    .await;
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("1 of 1 record(s) copied"), "{text}");
    let again = cycles_core::journal::Journal::for_partition(back.path(), j.partition(), "");
    assert_eq!(
        std::fs::read(again.path_of("rsv-ops")).unwrap(),
        bytes,
        "byte for byte"
    );

    let (code, _, text) = cycles(
        [
            "journal",
            "copy",
            "--from",
            &b,
            "--to",
            "rediss://127.0.0.1/0",
        ]
        .map(String::from)
        .to_vec(),
    )
    .await;
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("TLS"), "{text}");
}

/// `list`, `show`, `drain` and `quarantine` on a Redis journal (`--url`): a settlement the
/// engine left pending in Redis is seen, shown in full, drained once by the `cycles` process
/// (a worker of its own, sharing nothing with the writer but Redis), and a corrupt record put
/// beside it is quarantined inside Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_show_drain_and_quarantine_a_redis_journal() {
    let data = tempfile::tempdir().unwrap();
    let redis = cycles_test_redis::RedisServer::start(data.path(), true).unwrap();
    let url = redis.url();
    let server = LocalServer::start(ServerConfig::default()).await.unwrap();
    let config = Config::new(server.url(), KEY)
        .with_journal_dir(data.path().join("writer-never-uses-this"))
        .with_journal_url(&url);
    let id = leave_pending(&server, &config, "ops-redis").await;
    let partition = cycles_core::journal::identity::partition(&config.base_url, KEY, None);
    let run = |args: &[&str]| cycles(args.iter().map(|s| s.to_string()).collect());

    let (code, json, text) = run(&["journal", "list", "--url", &url, "--json"]).await;
    assert_eq!(code, 0, "{text}");
    assert_eq!(json["journal_url"], url.as_str(), "{json}");
    let pending = json["pending"].as_array().expect("pending list");
    assert_eq!(pending.len(), 1, "{json}");
    assert_eq!(pending[0]["reservation_id"], id.as_str());
    assert_eq!(pending[0]["partition"], partition.as_str());
    assert_eq!(pending[0]["actual"]["amount"], 600);
    let (code, _, text) = run(&["journal", "list", "--url", &url]).await;
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("1 pending") && text.contains(&server.url()),
        "{text}"
    );

    let (code, json, text) = run(&["journal", "show", &id, "--url", &url, "--json"]).await;
    assert_eq!(code, 0, "{text}");
    assert_eq!(json["reservation_id"], id.as_str(), "{json}");
    let key = json["key"].as_str().expect("the record's Redis key");
    assert!(
        key.starts_with(&format!("cycles:journal:{{{partition}}}:r:v2-")),
        "{key}"
    );
    assert_eq!(
        json["record"]["commit_body"]["idempotency_key"], "ops-redis:commit",
        "{json}"
    );
    let (code, _, text) = run(&["journal", "show", "rsv-none", "--url", &url]).await;
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("no pending record"), "{text}");

    // A corrupt record beside it, in the same partition: quarantined by the drain's pass.
    let bad = format!("v2-{}.json", "0".repeat(64));
    let prefix = format!("cycles:journal:{{{partition}}}");
    redis_cmd(&url, &["SET", &format!("{prefix}:r:{bad}"), "{not json"]);
    redis_cmd(&url, &["SADD", &format!("{prefix}:records"), &bad]);

    server.clear_faults();
    let (code, json, text) = run(&[
        "journal",
        "drain",
        "--url",
        &url,
        "--base-url",
        &server.url(),
        "--api-key",
        KEY,
        "--deadline-ms",
        "5000",
        "--json",
    ])
    .await;
    assert_eq!(code, 3, "settled, and a record quarantined: {text}");
    assert_eq!(json["settled"], 1, "{json}");
    let commits = server
        .ledger()
        .iter()
        .filter(|e| e.kind == "commit")
        .count();
    assert_eq!(commits, 1);

    let (code, json, text) = run(&["journal", "list", "--url", &url, "--json"]).await;
    assert_eq!(code, 0, "{text}");
    assert_eq!(json["pending"].as_array().map(Vec::len), Some(0), "{json}");
    assert_eq!(json["quarantined"], 1, "{json}");
    let (code, json, text) = run(&["journal", "quarantine", "--url", &url, "--json"]).await;
    assert_eq!(code, 0, "{text}");
    let q = json["quarantined"].as_array().expect("quarantined");
    assert_eq!(q.len(), 1, "{json}");
    assert_eq!(q[0]["category"], "corrupt", "{json}");

    // A Redis that is not there is an error naming it, never "0 pending".
    let gone = format!("redis://127.0.0.1:{}/0", cycles_test_redis::free_port());
    let (code, _, text) = run(&["journal", "list", "--url", &gone]).await;
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("127.0.0.1"), "{text}");
}

/// One command to the Redis at `url` (`redis-cli` is not needed: a raw RESP request).
fn redis_cmd(url: &str, args: &[&str]) {
    use std::io::{Read, Write};
    let port: u16 = url
        .trim_start_matches("redis://127.0.0.1:")
        .trim_end_matches("/0")
        .parse()
        .unwrap();
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut req = format!("*{}\r\n", args.len());
    for a in args {
        req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    s.write_all(req.as_bytes()).unwrap();
    let mut buf = [0u8; 64];
    let n = s.read(&mut buf).unwrap();
    assert!(
        n > 0 && buf[0] != b'-',
        "{}",
        String::from_utf8_lossy(&buf[..n])
    );
}
