//! The fake model provider (`cycles-fake-provider`) as every host's `FakeProvider` wraps it:
//! config and fault rules as JSON in (checked here: an unknown key is INVALID_ARGUMENT naming
//! it), the request log as JSON out. Hosts translate syntax only, and start and stop it on
//! core's runtime with `runtime::handle()?.block_on`, as [`crate::server`] says.

use std::sync::Mutex;

use cycles_core::error::json_reason;
use cycles_fake_provider::{FakeConfig, FakeProvider, FaultRule};

use crate::error::ErrorFields;
use crate::task::Work;

/// The fake provider's config of its JSON (`None`: the defaults). Unknown keys, wrong types
/// and bad values are INVALID_ARGUMENT "invalid fake provider config: ...".
pub fn parse_config(json: Option<&str>) -> Result<FakeConfig, ErrorFields> {
    match json {
        None => Ok(FakeConfig::default()),
        Some(j) => serde_json::from_str(j).map_err(|e| {
            ErrorFields::invalid(format!("invalid fake provider config: {}", json_reason(&e)))
        }),
    }
}

/// One fault rule of its JSON (INVALID_ARGUMENT "invalid fake provider fault rule: ...").
pub fn parse_fault(json: &str) -> Result<FaultRule, ErrorFields> {
    serde_json::from_str(json).map_err(|e| {
        ErrorFields::invalid(format!(
            "invalid fake provider fault rule: {}",
            json_reason(&e)
        ))
    })
}

/// A running fake provider.
pub struct Provider {
    inner: Mutex<Option<FakeProvider>>,
    url: String,
}

fn stopped() -> ErrorFields {
    ErrorFields::invalid("the fake provider is stopped")
}

impl Provider {
    /// Checks `config_json` now, then returns the start to block on with core's runtime
    /// (never `task::start`: see [`crate::server::Server::start`]).
    pub fn start(
        config_json: Option<&str>,
    ) -> Result<Work<Result<Provider, ErrorFields>>, ErrorFields> {
        let config = parse_config(config_json)?;
        Ok(Box::pin(async move {
            let p = FakeProvider::start(config).await.map_err(|e| {
                ErrorFields::invalid(format!("cannot start the fake provider: {e}"))
            })?;
            Ok(Provider {
                url: p.url(),
                inner: Mutex::new(Some(p)),
            })
        }))
    }

    fn with<T>(&self, f: impl FnOnce(&FakeProvider) -> T) -> Result<T, ErrorFields> {
        let guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        guard.as_ref().map(f).ok_or_else(stopped)
    }

    /// `http://127.0.0.1:PORT` (no trailing slash): the Anthropic base URL; the OpenAI
    /// base URL is this plus `/v1` (both forms are served).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Whether [`Provider::stop`] has not been called.
    pub fn is_running(&self) -> bool {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// The requests received (`RequestRecord[]`) as JSON.
    pub fn requests_json(&self) -> Result<String, ErrorFields> {
        self.with(|p| {
            serde_json::to_string(&p.requests())
                .map_err(|e| ErrorFields::internal(format!("cannot encode: {e}")))
        })?
    }

    /// Empties the request log, restarts call numbering, and keeps only the configured
    /// fault rules (their counts at zero).
    pub fn reset(&self) -> Result<(), ErrorFields> {
        self.with(FakeProvider::reset)
    }

    /// Adds a fault rule given as JSON.
    pub fn add_fault(&self, rule_json: &str) -> Result<(), ErrorFields> {
        let rule = parse_fault(rule_json)?;
        self.with(|p| p.add_fault(rule))
    }

    /// Removes every fault rule.
    pub fn clear_faults(&self) -> Result<(), ErrorFields> {
        self.with(FakeProvider::clear_faults)
    }

    /// Stops the provider: later calls fail with the stopped error. Returns the shutdown to
    /// run, or `None` when already stopped (a host that cannot run it forgets it).
    pub fn stop(&self) -> Option<Work<()>> {
        let p = self
            .inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()?;
        Some(Box::pin(p.shutdown()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_errors_name_the_key_without_positions() {
        let e = parse_config(Some(r#"{"replys": {}}"#)).err().unwrap();
        assert_eq!(e.name, "INVALID_ARGUMENT");
        assert!(
            e.message.starts_with(
                "invalid fake provider config: unknown field `replys`, expected one of"
            ),
            "{}",
            e.message
        );
        assert!(!e.message.contains(" at line "), "{}", e.message);
        let e = parse_fault(r#"{"fault": {"kind": "cut_stream"}}"#)
            .err()
            .unwrap();
        assert!(
            e.message
                .starts_with("invalid fake provider fault rule: missing field `after_chunks`"),
            "{}",
            e.message
        );
    }

    #[test]
    fn start_record_reset_and_stop() {
        let rt = cycles_core::runtime::handle().unwrap();
        let p = rt
            .block_on(Provider::start(Some(r#"{"reply": "a b"}"#)).unwrap())
            .unwrap();
        assert!(p.url().starts_with("http://127.0.0.1:"));
        assert_eq!(p.requests_json().unwrap(), "[]");
        p.add_fault(r#"{"fault": {"kind": "server_error"}}"#)
            .unwrap();
        p.clear_faults().unwrap();
        p.reset().unwrap();
        rt.block_on(p.stop().expect("running"));
        assert!(!p.is_running() && p.stop().is_none());
        assert_eq!(
            p.requests_json().err().unwrap().message,
            "the fake provider is stopped"
        );
    }
}
