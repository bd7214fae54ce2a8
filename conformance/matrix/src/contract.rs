//! The lifecycle contract (issue 28): one table of guarded actions, each run by every face
//! through its public guard API against one local server, with the client's defaults doing
//! the rest (a bare estimate in the client's default unit, the subject from its tenant). Every
//! face must give the same answer, the one written here, and the server's ledger must show
//! exactly the requests the contract allows: a settlement only with a known actual, a release
//! wherever nothing can be committed, nothing twice. A second table does the same for the
//! client's options: each face builds a client of the same options through its own API (its
//! names, its units) and must raise the same error, or run the same guarded action.

use cycles_local_server::{BudgetSeed, CapsSeed, LedgerEntry, LocalServer, ServerConfig};
use serde_json::{json, Value};

use crate::face::{canonical, Face};
use crate::table::Table;

pub(crate) const KEY: &str = "cycles-local-key";
pub(crate) const TENANT: &str = "acme";
/// The client's default unit: every estimate below is a bare number in it.
pub(crate) const UNIT: &str = "TOKENS";
/// The budget's allocation: an estimate past it is denied.
const ALLOCATED: i64 = 1_000_000;
/// The row of the table.
pub const LABEL: &str = "lifecycle contract";

/// One guarded action: what the work does, step by step, and what every face must answer.
struct Case {
    name: &'static str,
    /// The base idempotency key, `{f}` replaced by the face's name; `None`: the face's
    /// default key.
    key: Option<&'static str>,
    estimate: i64,
    /// `None`: the client's tenant (the default under test).
    subject: Option<Value>,
    steps: Value,
    /// The canonical answer (PROTOCOL.md, `guard`).
    expect: Value,
    /// The ledger kinds this action leaves, in order.
    ledger: &'static [&'static str],
}

fn answer(
    decision: Option<&str>,
    steps: Value,
    outcome: Option<&str>,
    released: Option<bool>,
    charged: Option<i64>,
    error: Option<&str>,
) -> Value {
    json!({"decision": decision, "caps": null, "steps": steps, "outcome": outcome,
           "released": released, "charged": charged, "error": error})
}

fn cases() -> Vec<Case> {
    let allow = Some("ALLOW");
    let ok2 = json!([null, null]);
    let mut out = vec![
        Case {
            name: "settled",
            key: Some("settled-{f}"),
            estimate: 100,
            subject: None,
            steps: json!([{"do": "set_actual", "amount": 40}, {"do": "end"}]),
            expect: answer(allow, ok2.clone(), Some("settled"), None, Some(40), None),
            ledger: &["reserve", "commit"],
        },
        Case {
            name: "streamed",
            key: Some("streamed-{f}"),
            estimate: 100,
            subject: None,
            steps: json!([{"do": "add", "amount": 10}, {"do": "add", "amount": 15}, {"do": "end"}]),
            expect: answer(
                allow,
                json!([null, null, null]),
                Some("settled"),
                None,
                Some(25),
                None,
            ),
            ledger: &["reserve", "commit"],
        },
        Case {
            name: "missing_actual",
            key: Some("missing-{f}"),
            estimate: 100,
            subject: None,
            steps: json!([{"do": "end"}]),
            expect: answer(
                allow,
                json!([null]),
                Some("missing_actual"),
                Some(true),
                None,
                Some("MISSING_ACTUAL"),
            ),
            ledger: &["reserve", "release"],
        },
        Case {
            name: "failed_before_usage",
            key: Some("failed-{f}"),
            estimate: 100,
            subject: None,
            steps: json!([{"do": "fail"}]),
            expect: answer(
                allow,
                json!([null]),
                Some("work_failed"),
                Some(true),
                None,
                Some("work"),
            ),
            ledger: &["reserve", "release"],
        },
        Case {
            name: "failed_after_usage",
            key: Some("partial-{f}"),
            estimate: 100,
            subject: None,
            steps: json!([{"do": "add", "amount": 30}, {"do": "fail"}]),
            expect: answer(
                allow,
                ok2.clone(),
                Some("work_failed"),
                Some(false),
                Some(30),
                Some("work"),
            ),
            ledger: &["reserve", "commit"],
        },
        Case {
            name: "released",
            key: Some("released-{f}"),
            estimate: 100,
            subject: None,
            steps: json!([{"do": "release", "reason": "not needed"}]),
            expect: answer(
                allow,
                json!([null]),
                Some("released"),
                Some(true),
                None,
                None,
            ),
            ledger: &["reserve", "release"],
        },
        Case {
            name: "release_refused_after_usage",
            key: Some("refused-{f}"),
            estimate: 100,
            subject: None,
            steps: json!([{"do": "add", "amount": 5}, {"do": "release", "reason": "x"}, {"do": "end"}]),
            expect: answer(
                allow,
                json!([null, "INVALID_ARGUMENT", null]),
                Some("settled"),
                None,
                Some(5),
                None,
            ),
            ledger: &["reserve", "commit"],
        },
        Case {
            name: "caps",
            key: Some("caps-{f}"),
            estimate: 100,
            subject: Some(json!({"tenant": TENANT, "workspace": "capped"})),
            steps: json!([{"do": "set_actual", "amount": 1}, {"do": "end"}]),
            expect: {
                let mut a = answer(
                    Some("ALLOW_WITH_CAPS"),
                    ok2.clone(),
                    Some("settled"),
                    None,
                    Some(1),
                    None,
                );
                a["caps"] = json!({"max_tokens": 64, "tool_denylist": ["shell"]});
                a
            },
            ledger: &["reserve", "commit"],
        },
        Case {
            name: "denied",
            key: Some("denied-{f}"),
            estimate: ALLOCATED * 10,
            subject: None,
            steps: json!([{"do": "set_actual", "amount": 1}, {"do": "end"}]),
            expect: answer(None, json!([]), None, None, None, Some("BUDGET_EXCEEDED")),
            ledger: &[],
        },
        Case {
            name: "default_key",
            key: None,
            estimate: 100,
            subject: None,
            steps: json!([{"do": "set_actual", "amount": 2}, {"do": "end"}]),
            expect: answer(allow, ok2.clone(), Some("settled"), None, Some(2), None),
            ledger: &["reserve", "commit"],
        },
    ];
    // Keys an HTTP header cannot carry byte for byte: sent in the body only.
    for (name, key) in [
        ("key_padded", " padded-{f} "),
        ("key_trailing_space", "trail-{f} "),
        ("key_latin1", "k\u{e9}y-{f}"),
        ("key_cjk_emoji", "\u{6f22}\u{5b57}-\u{1f600}-{f}"),
    ] {
        out.push(Case {
            name,
            key: Some(key),
            estimate: 100,
            subject: None,
            steps: json!([{"do": "set_actual", "amount": 3}, {"do": "end"}]),
            expect: answer(allow, ok2.clone(), Some("settled"), None, Some(3), None),
            ledger: &["reserve", "commit"],
        });
    }
    out
}

fn server_config() -> ServerConfig {
    let budget = |scope: &str, caps: Option<CapsSeed>| BudgetSeed {
        scope: scope.into(),
        unit: UNIT.into(),
        allocated: ALLOCATED,
        caps,
        ..BudgetSeed::default()
    };
    ServerConfig {
        budgets: vec![
            budget("tenant:acme", None),
            budget(
                "tenant:acme/workspace:capped",
                Some(CapsSeed {
                    max_tokens: Some(64),
                    tool_denylist: Some(vec!["shell".into()]),
                    ..CapsSeed::default()
                }),
            ),
        ],
        ..ServerConfig::default()
    }
}

/// One row of the options table: a client of these options (canonical names, snake_case in
/// ms; each face spells them its own way), then one guarded action under the case's key.
struct OptionCase {
    name: &'static str,
    options: Value,
    /// The Cycles error name building the client or the action raised, `None`: none.
    error: Option<&'static str>,
    /// The ledger kinds under the case's key, in order.
    ledger: &'static [&'static str],
}

fn option_cases() -> Vec<OptionCase> {
    let base = |extra: Value| {
        let mut o = json!({"tenant": TENANT, "default_unit": UNIT});
        for (k, v) in extra.as_object().expect("an object") {
            o[k] = v.clone();
        }
        o
    };
    let settled: &[&str] = &["reserve", "commit"];
    let refused = |name, options, error| OptionCase {
        name,
        options,
        error: Some(error),
        ledger: &[],
    };
    vec![
        OptionCase {
            name: "tenant and default unit",
            options: base(json!({})),
            error: None,
            ledger: settled,
        },
        OptionCase {
            name: "every option set",
            options: base(
                json!({"request_timeout_ms": 4000, "connect_timeout_ms": 2000,
                "max_concurrent_requests": 4, "settle_max_attempts": 2,
                "replay_interval_ms": 500, "journal_enabled": true}),
            ),
            error: None,
            ledger: settled,
        },
        // The default unit of a bare estimate is USD_MICROCENTS; this server has TOKENS only.
        OptionCase {
            name: "no default unit",
            options: json!({"tenant": TENANT}),
            error: Some("UNIT_MISMATCH"),
            ledger: &[],
        },
        // No tenant: the subject a bare guarded call defaults to does not exist.
        refused(
            "no tenant",
            json!({"default_unit": UNIT}),
            "INVALID_ARGUMENT",
        ),
        refused(
            "unknown unit",
            base(json!({"default_unit": "TOKEN"})),
            "CONFIG",
        ),
        refused(
            "zero request timeout",
            base(json!({"request_timeout_ms": 0})),
            "CONFIG",
        ),
        refused(
            "request timeout past core's maximum",
            base(json!({"request_timeout_ms": 90_000_000})),
            "CONFIG",
        ),
        refused(
            "zero connect timeout",
            base(json!({"connect_timeout_ms": 0})),
            "CONFIG",
        ),
        refused(
            "zero request bound",
            base(json!({"max_concurrent_requests": 0})),
            "CONFIG",
        ),
        refused(
            "zero settle attempts",
            base(json!({"settle_max_attempts": 0})),
            "CONFIG",
        ),
        refused(
            "zero replay interval",
            base(json!({"replay_interval_ms": 0})),
            "CONFIG",
        ),
    ]
}

/// The ledger entries of one action: those whose key is the case's base key or derived from
/// it (`{key}:commit`, `{key}:release`).
fn entries<'a>(ledger: &'a [LedgerEntry], base: &str) -> Vec<&'a LedgerEntry> {
    ledger
        .iter()
        .filter(|e| {
            e.idempotency_key == base
                || e.idempotency_key
                    .strip_prefix(base)
                    .is_some_and(|rest| rest.starts_with(':'))
        })
        .collect()
}

/// Runs every case in every face; one cell per face, failures as lines.
pub async fn run(faces: &mut [Face], table: &mut Table, root: &std::path::Path) -> Vec<String> {
    let mut failures = Vec::new();
    let server = match LocalServer::start(server_config()).await {
        Ok(s) => s,
        Err(e) => return vec![format!("{LABEL}: cannot start the local server: {e}")],
    };
    let url = server.url();
    let cases = cases();
    for face in faces.iter_mut() {
        let journal = root.join(format!("contract-{}", face.name));
        let mut requests = Vec::new();
        let mut keys = Vec::new();
        for c in &cases {
            let key = c.key.map(|k| k.replace("{f}", &face.name));
            let mut case = json!({"name": c.name, "estimate": c.estimate, "steps": c.steps,
                                  "idempotency_key": key, "subject": c.subject});
            if c.subject.is_none() {
                case["subject"] = Value::Null;
            }
            requests.push(
                json!({"op": "guard", "url": url, "api_key": KEY, "tenant": TENANT,
                "default_unit": UNIT, "journal_dir": journal.to_string_lossy(), "case": case}),
            );
            keys.push(key);
        }
        let ledger_before = server.ledger().len();
        let answers = match tokio::task::block_in_place(|| face.batch(requests)) {
            Ok(a) => a,
            Err(e) => {
                failures.push(format!("{LABEL}: {}: {e}", face.name));
                table.add(LABEL, &face.name, 0, cases.len() as u64);
                continue;
            }
        };
        let ledger: Vec<LedgerEntry> = server.ledger().into_iter().skip(ledger_before).collect();
        let mut passed = 0;
        for ((c, key), got) in cases.iter().zip(&keys).zip(&answers) {
            let ok = &got["ok"];
            let mut problems = Vec::new();
            if canonical(ok) != canonical(&c.expect) {
                problems.push(format!(
                    "answered {}, expected {}",
                    canonical(got),
                    canonical(&c.expect)
                ));
            }
            match key {
                Some(k) => {
                    let mine = entries(&ledger, k);
                    let kinds: Vec<&str> = mine.iter().map(|e| e.kind.as_str()).collect();
                    if kinds != c.ledger {
                        problems.push(format!("ledger {kinds:?}, expected {:?}", c.ledger));
                    }
                    if mine
                        .iter()
                        .any(|e| e.unit.as_deref().is_some_and(|u| u != UNIT))
                    {
                        problems.push(format!("ledger units not all {UNIT}"));
                    }
                    if mine.first().is_some_and(|e| e.amount != Some(c.estimate)) {
                        problems.push(format!("reserved {:?}, not {}", mine[0].amount, c.estimate));
                    }
                }
                None => {
                    // The face's own key: a fresh one, and its derived keys beside it.
                    let fresh: Vec<&LedgerEntry> = ledger
                        .iter()
                        .filter(|e| e.kind == "reserve" && e.idempotency_key.starts_with("cycles-"))
                        .collect();
                    match fresh.as_slice() {
                        [one] => {
                            let kinds: Vec<&str> = entries(&ledger, &one.idempotency_key)
                                .iter()
                                .map(|e| e.kind.as_str())
                                .collect();
                            if kinds != c.ledger {
                                problems.push(format!("ledger {kinds:?}, expected {:?}", c.ledger));
                            }
                        }
                        other => problems.push(format!(
                            "{} reservations with a default cycles-<uuid> key, expected 1",
                            other.len()
                        )),
                    }
                }
            }
            if problems.is_empty() {
                passed += 1;
            } else {
                failures.push(format!(
                    "{LABEL}: {} {}: {}",
                    face.name,
                    c.name,
                    problems.join("; ")
                ));
            }
        }
        let (p, f) = run_options(face, &server, &url, &journal).await;
        failures.extend(f);
        let (d, f) = crate::disks::run(face, &server, &url, root).await;
        failures.extend(f);
        table.add(
            LABEL,
            &face.name,
            passed + p + d,
            (cases.len() + option_cases().len() + 1) as u64,
        );
    }
    failures
}

/// The options table in one face: its answers and the ledger under each case's key.
async fn run_options(
    face: &mut Face,
    server: &LocalServer,
    url: &str,
    journal: &std::path::Path,
) -> (u64, Vec<String>) {
    let cases = option_cases();
    let name = face.name.clone();
    let key = |c: &OptionCase| format!("options-{name}-{}", c.name.replace(' ', "-"));
    let requests: Vec<Value> = cases
        .iter()
        .map(|c| {
            json!({"op": "client", "url": url, "api_key": KEY,
                   "journal_dir": journal.to_string_lossy(), "key": key(c), "options": c.options})
        })
        .collect();
    let answers = match tokio::task::block_in_place(|| face.batch(requests)) {
        Ok(a) => a,
        Err(e) => return (0, vec![format!("{LABEL}: {} options: {e}", face.name)]),
    };
    let ledger = server.ledger();
    let mut passed = 0;
    let mut failures = Vec::new();
    for (c, got) in cases.iter().zip(&answers) {
        let mut problems = Vec::new();
        let want = json!({"error": c.error});
        if canonical(&got["ok"]) != canonical(&want) {
            problems.push(format!(
                "answered {}, expected {}",
                canonical(got),
                canonical(&want)
            ));
        }
        let kinds: Vec<&str> = entries(&ledger, &key(c))
            .iter()
            .map(|e| e.kind.as_str())
            .collect();
        if kinds != c.ledger {
            problems.push(format!("ledger {kinds:?}, expected {:?}", c.ledger));
        }
        if problems.is_empty() {
            passed += 1;
        } else {
            failures.push(format!(
                "{LABEL}: {} options {}: {}",
                face.name,
                c.name,
                problems.join("; ")
            ));
        }
    }
    (passed, failures)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_keys_belong_to_their_base() {
        let e = |k: &str| LedgerEntry {
            seq: 1,
            kind: "commit".into(),
            tenant: TENANT.into(),
            reservation_id: None,
            idempotency_key: k.into(),
            unit: None,
            amount: None,
            applied_at_ms: 0,
        };
        let ledger = [e("a-rust"), e("a-rust:commit"), e("a-rust2:commit"), e("b")];
        let got: Vec<&str> = entries(&ledger, "a-rust")
            .iter()
            .map(|e| e.idempotency_key.as_str())
            .collect();
        assert_eq!(got, ["a-rust", "a-rust:commit"]);
    }

    #[test]
    fn every_option_case_has_a_unique_name() {
        let cases = option_cases();
        let names: std::collections::BTreeSet<_> = cases.iter().map(|c| c.name).collect();
        assert_eq!(names.len(), cases.len());
    }

    #[test]
    fn every_case_has_a_unique_name_and_key() {
        let cases = cases();
        let names: std::collections::BTreeSet<_> = cases.iter().map(|c| c.name).collect();
        let keys: std::collections::BTreeSet<_> = cases.iter().filter_map(|c| c.key).collect();
        assert_eq!(names.len(), cases.len());
        assert_eq!(keys.len(), cases.len() - 1);
    }
}
