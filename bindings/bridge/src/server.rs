//! The local Cycles server (`cycles-local-server`) for users' own tests, as every host's
//! `LocalServer` wraps it: config and fault rules as JSON in (checked here: an unknown key is
//! INVALID_ARGUMENT naming it, never a server silently started with the defaults), the
//! ledger and the request log as JSON out. Hosts translate syntax only.

use std::sync::Mutex;

use cycles_core::error::json_reason;
use cycles_local_server::{FaultRule, LocalServer, ServerConfig};

use crate::error::ErrorFields;
use crate::task::Work;

/// The server's config of its JSON (`None`: the defaults). Unknown keys, wrong types and bad
/// values are INVALID_ARGUMENT `"invalid server config: budgets[0]: unknown field ..."`: where
/// the bad member is, then why, without serde's positions in JSON the user never wrote. Every
/// host's own config type says it no further: this text is the one they all show.
pub fn parse_config(json: Option<&str>) -> Result<ServerConfig, ErrorFields> {
    match json {
        None => Ok(ServerConfig::default()),
        Some(j) => parse(j, "server config"),
    }
}

/// One fault rule of its JSON (INVALID_ARGUMENT "invalid fault rule: ...", as
/// [`parse_config`] words it).
pub fn parse_fault(json: &str) -> Result<FaultRule, ErrorFields> {
    parse(json, "fault rule")
}

fn parse<T: serde::de::DeserializeOwned>(json: &str, what: &str) -> Result<T, ErrorFields> {
    let de = &mut serde_json::Deserializer::from_str(json);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let mut path = e.path().to_string();
        let reason = json_reason(e.inner());
        // An unknown field's path ends with the field itself, which the reason names already.
        if let Some(field) = reason
            .strip_prefix("unknown field `")
            .and_then(|r| r.split('`').next())
        {
            if path == field {
                path = ".".into();
            } else if let Some(parent) = path.strip_suffix(&format!(".{field}")) {
                path = parent.to_string();
            }
        }
        ErrorFields::invalid(if path == "." {
            format!("invalid {what}: {reason}")
        } else {
            format!("invalid {what}: {path}: {reason}")
        })
    })
}

/// A running local server and the identity of its first tenant.
pub struct Server {
    inner: Mutex<Option<LocalServer>>,
    url: String,
    api_key: String,
    tenant: String,
}

/// The stopped error: a call after [`Server::stop`].
fn stopped() -> ErrorFields {
    ErrorFields::invalid("the local server is stopped")
}

impl Server {
    /// Checks `config_json` now, then returns the start to run on core's runtime: a host
    /// blocks on it with `runtime::handle()?.block_on` (its lock released), never through
    /// `task::start`, which may drive the work on the caller's own thread and leave the
    /// server's tasks without a driver. The same holds for [`Server::stop`].
    pub fn start(
        config_json: Option<&str>,
    ) -> Result<Work<Result<Server, ErrorFields>>, ErrorFields> {
        let config = parse_config(config_json)?;
        let first = config.tenants.first();
        let tenant = first.map(|t| t.id.clone()).unwrap_or_default();
        let api_key = first
            .and_then(|t| t.api_keys.first().cloned())
            .unwrap_or_default();
        Ok(Box::pin(async move {
            let server = LocalServer::start(config)
                .await
                .map_err(|e| ErrorFields::invalid(format!("cannot start the local server: {e}")))?;
            Ok(Server {
                url: server.url(),
                inner: Mutex::new(Some(server)),
                api_key,
                tenant,
            })
        }))
    }

    fn with<T>(&self, f: impl FnOnce(&LocalServer) -> T) -> Result<T, ErrorFields> {
        let guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        guard.as_ref().map(f).ok_or_else(stopped)
    }

    /// `http://127.0.0.1:PORT` (no trailing slash, no `/v1`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The first API key of the first configured tenant.
    pub fn api_key(&self) -> &str {
        &self.api_key
    }

    /// The first configured tenant.
    pub fn tenant(&self) -> &str {
        &self.tenant
    }

    /// Whether [`Server::stop`] has not been called.
    pub fn is_running(&self) -> bool {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// Adds a fault rule given as JSON.
    pub fn add_fault(&self, rule_json: &str) -> Result<(), ErrorFields> {
        let rule = parse_fault(rule_json)?;
        self.with(|s| s.add_fault(rule))
    }

    /// Removes every fault rule.
    pub fn clear_faults(&self) -> Result<(), ErrorFields> {
        self.with(LocalServer::clear_faults)
    }

    /// The ledger (every applied mutation, `LedgerEntry[]`) as JSON.
    pub fn ledger_json(&self) -> Result<String, ErrorFields> {
        self.with(|s| to_json(&s.ledger()))?
    }

    /// The requests received (`RequestRecord[]`) as JSON.
    pub fn requests_json(&self) -> Result<String, ErrorFields> {
        self.with(|s| to_json(&s.requests()))?
    }

    /// Moves the server's clock forward by `ms` (lease expiry without waiting).
    pub fn advance_clock(&self, ms: u64) -> Result<(), ErrorFields> {
        self.with(|s| s.advance_clock(ms))
    }

    /// The server's clock (epoch ms).
    pub fn now_ms(&self) -> Result<i64, ErrorFields> {
        self.with(LocalServer::now_ms)
    }

    /// Opens or closes a tenant (a closed tenant's persisting calls get 409 TENANT_CLOSED).
    pub fn set_tenant_closed(&self, tenant: &str, closed: bool) -> Result<(), ErrorFields> {
        self.with(|s| s.set_tenant_closed(tenant, closed))
    }

    /// Stops the server: later calls fail with the stopped error. Returns the shutdown to
    /// run (the server drains its connections), or `None` when already stopped. A host that
    /// cannot run it (after `fork`, the runtime's threads are gone) drops it with
    /// `std::mem::forget`.
    pub fn stop(&self) -> Option<Work<()>> {
        let server = self
            .inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()?;
        Some(Box::pin(server.shutdown()))
    }
}

fn to_json<T: serde::Serialize>(v: &T) -> Result<String, ErrorFields> {
    serde_json::to_string(v).map_err(|e| ErrorFields::internal(format!("cannot encode: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_errors_name_the_key_without_positions() {
        let e = parse_config(Some(r#"{"budget": [{"scope": "tenant:acme"}]}"#))
            .err()
            .unwrap();
        assert_eq!(e.name, "INVALID_ARGUMENT");
        assert!(
            e.message
                .starts_with("invalid server config: unknown field `budget`, expected one of"),
            "{}",
            e.message
        );
        assert!(!e.message.contains(" at line "), "{}", e.message);
        let e = parse_config(Some(
            r#"{"budgets": [{"scope": "tenant:acme", "alocated": 5}]}"#,
        ))
        .err()
        .unwrap();
        assert!(
            e.message
                .starts_with("invalid server config: budgets[0]: unknown field `alocated`"),
            "{}",
            e.message
        );
        let e = parse_config(Some(
            r#"{"regime": {"extend": {"kind": "grant_cap", "max": 5}}}"#,
        ))
        .err()
        .unwrap();
        assert!(
            e.message
                .starts_with("invalid server config: regime.extend: unknown field `max`"),
            "{}",
            e.message
        );
        let e = parse_fault(r#"{"operation": "commitReservation", "fault": {"kind": "nope"}}"#)
            .err()
            .unwrap();
        assert!(
            e.message.starts_with("invalid fault rule: "),
            "{}",
            e.message
        );
        assert!(!e.message.contains(" at line "), "{}", e.message);
        // Every fault kind refuses unknown keys, the unit kinds too (the server's own check).
        for (rule, key) in [
            (
                r#"{"operation":"commitReservation","time":1,"fault":{"kind":"connection_reset"}}"#,
                "time",
            ),
            (
                r#"{"operation":"commitReservation","fault":{"kind":"connection_reset","ms":5}}"#,
                "ms",
            ),
            (
                r#"{"operation":"commitReservation","fault":{"kind":"delay","ms":5,"jitter":1}}"#,
                "jitter",
            ),
        ] {
            let e = parse_fault(rule).err().unwrap();
            assert!(
                e.message.starts_with("invalid fault rule: "),
                "{}",
                e.message
            );
            assert!(e.message.contains(&format!("`{key}`")), "{}", e.message);
        }
        let small = parse_config(Some(
            r#"{"budgets": [{"scope": "tenant:acme", "unit": "TOKENS", "allocated": 100}]}"#,
        ))
        .unwrap();
        assert_eq!(small.budgets[0].allocated, 100);
    }

    #[test]
    fn start_inspect_and_stop() {
        let rt = cycles_core::runtime::handle().unwrap();
        let s = rt.block_on(Server::start(None).unwrap()).unwrap();
        assert!(s.url().starts_with("http://127.0.0.1:"));
        assert_eq!((s.api_key(), s.tenant()), ("cycles-local-key", "acme"));
        assert_eq!(s.ledger_json().unwrap(), "[]");
        s.add_fault(r#"{"operation": "commitReservation", "fault": {"kind": "connection_reset"}}"#)
            .unwrap();
        s.clear_faults().unwrap();
        let before = s.now_ms().unwrap();
        s.advance_clock(1_000).unwrap();
        assert!(s.now_ms().unwrap() >= before + 1_000);
        rt.block_on(s.stop().expect("running"));
        assert!(!s.is_running() && s.stop().is_none());
        assert_eq!(
            s.ledger_json().err().unwrap().message,
            "the local server is stopped"
        );
    }
}
