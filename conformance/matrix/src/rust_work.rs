//! The Rust face's `work` op (PROTOCOL.md): guarded actions in a loop through core's guard,
//! for the crash loop (`cycles-matrix crashloop`), which SIGKILLs the face mid-way. Its own
//! file so another op added to the Rust face touches only the dispatch line.

use std::sync::Arc;
use std::time::Duration;

use cycles_core::events::EventSink;
use cycles_core::guard::{Finished, Guard, GuardSpec};
use cycles_core::settle::{SettleConfig, SettleOutcome, Settler};
use cycles_core::{Action, Config, CyclesClient, Error};
use serde_json::{json, Value};

type R<T> = Result<T, String>;

fn int(v: &Value, name: &str) -> R<i64> {
    v.get(name)
        .and_then(Value::as_i64)
        .ok_or_else(|| format!("{name} must be an integer"))
}

fn text<'a>(v: &'a Value, name: &str) -> R<&'a str> {
    v.get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{name} must be a string"))
}

/// Runs every action of the request in order (PROTOCOL.md, `work`): one client of the
/// tenant, default unit and journal; each action a guarded action under its key, estimate
/// and TTL whose work sleeps `sleep_ms`, sets the actual and returns. Answers the outcome
/// name of each.
pub async fn work(r: &Value) -> R<Value> {
    let cfg = crate::rust_face::with_journal_url(
        Config::new(text(r, "url")?, text(r, "api_key")?)
            .with_journal_dir(text(r, "journal_dir")?)
            .with_tenant(text(r, "tenant")?)
            .with_default_unit(text(r, "default_unit")?),
        r,
    );
    let err = |e: Error| e.to_string();
    let client = Arc::new(CyclesClient::new(cfg.clone()).map_err(err)?);
    let guard = Guard::new(
        client,
        Settler::new(&cfg, SettleConfig::default()).map_err(err)?,
        EventSink::tracing_only(),
    );
    let actions = r
        .get("actions")
        .and_then(Value::as_array)
        .ok_or("actions must be a list")?;
    let mut outcomes = Vec::new();
    for a in actions {
        let action = Action::new("llm.completion", "crashloop");
        let mut spec = GuardSpec::with_defaults(&cfg, action, int(a, "estimate")?).map_err(err)?;
        spec.idempotency_key = text(a, "key")?.to_string();
        if let Some(ttl) = a.get("ttl_ms").and_then(Value::as_i64) {
            spec.ttl_ms = ttl;
        }
        let sleep = Duration::from_millis(int(a, "sleep_ms")? as u64);
        let actual = int(a, "actual")?;
        let active = guard.begin(spec).await.map_err(err)?;
        tokio::time::sleep(sleep).await;
        active.usage().set_actual(actual).map_err(err)?;
        let name = match active.finish(true).await {
            Finished::Settled { settlement, .. } => match settlement {
                SettleOutcome::Pending { .. } => "pending",
                _ => "settled",
            },
            Finished::HeartbeatLapsed { .. } => "heartbeat_lapsed",
            other => return Err(format!("the action ended {other:?}")),
        };
        outcomes.push(name);
    }
    Ok(json!({"outcomes": outcomes}))
}
