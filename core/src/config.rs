//! Client configuration: base URL, API key, tenant, timeouts and journal settings, built
//! in code or read from `CYCLES_*` environment variables.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use crate::error::Error;
use crate::model::Unit;

/// Default per-attempt request timeout (whole request, including the response body).
///
/// 10 s, not 30 s: the timeout is the heartbeat's attempt budget, and the spec asks clients to
/// choose defaults with `attempt_budget < (lead − safety_margin) / 2`. With the protocol's
/// default 60 s TTL a 30 s timeout leaves no positive heartbeat delay at all; 10 s gives the
/// spec's worked example (23 s reserve, ~37 s cadence).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Default connect timeout.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Default bound on one client's in-flight HTTP requests (and so its connections).
pub const DEFAULT_MAX_CONCURRENT_REQUESTS: usize = 256;
/// Default bound of one response body. Cycles bodies are small (a page of 200 reservations
/// is tens of kilobytes); the bound keeps a broken or hostile server from filling memory.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 1 << 20;
/// Upper bound for both timeouts. Keeping timeouts finite and bounded guarantees that a
/// hung server can never stall a heartbeat or settlement forever, and that `Instant`
/// arithmetic on them cannot overflow.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 60 * 60);

/// A secret string (the API key). `Debug` is redacted and there is no `Display`, so it
/// cannot leak through logs, panics or error messages by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret.
    pub fn new(s: impl Into<String>) -> Secret {
        Secret(s.into())
    }

    /// The secret value; call only where it is sent (the auth header).
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// True when the secret is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl From<&str> for Secret {
    fn from(s: &str) -> Secret {
        Secret::new(s)
    }
}

impl From<String> for Secret {
    fn from(s: String) -> Secret {
        Secret::new(s)
    }
}

/// Settings of the durable commit journal (used by the settlement layer).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JournalConfig {
    /// Whether settlements are journaled to disk first.
    pub enabled: bool,
    /// Journal directory; default `$HOME/.runcycles/commit-journal`.
    pub dir: PathBuf,
    /// A Redis journal instead of the directory (`redis://host[:port][/db]`, with
    /// `?durability=aof|replicas:N|none`; docs/journal.md, "Stores"); `None`: the directory.
    pub url: Option<String>,
}

impl JournalConfig {
    /// The default journal directory for a home directory.
    pub fn default_dir(home: Option<&str>) -> PathBuf {
        let base = home
            .filter(|h| !h.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("."));
        base.join(".runcycles").join("commit-journal")
    }
}

impl Default for JournalConfig {
    fn default() -> Self {
        JournalConfig {
            enabled: true,
            dir: JournalConfig::default_dir(std::env::var("HOME").ok().as_deref()),
            url: None,
        }
    }
}

/// Configuration of a [`crate::CyclesClient`].
///
/// `base_url` is the server root WITHOUT `/v1` (e.g. `http://127.0.0.1:7878` or
/// `https://host/prefix`); a trailing slash is optional.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Server root (scheme, host, optional path prefix), without `/v1`.
    pub base_url: String,
    /// API key sent as `X-Cycles-API-Key`.
    pub api_key: Secret,
    /// Default tenant for callers that build subjects from config.
    pub tenant: Option<String>,
    /// Unit of an estimate given as a bare number (guarded calls); `None`: `USD_MICROCENTS`.
    pub default_unit: Option<Unit>,
    /// Per-attempt timeout of a whole request, response body included.
    pub request_timeout: Duration,
    /// Connect timeout.
    pub connect_timeout: Duration,
    /// Journal settings.
    pub journal: JournalConfig,
    /// Most HTTP requests one client has in flight at once (so at most this many
    /// connections); more wait for a slot, and the wait counts against the attempt's
    /// `request_timeout`. Without a bound, a burst of 10,000 guarded tasks opens 10,000
    /// connections to the server.
    pub max_concurrent_requests: usize,
    /// Most bytes one response body may hold. A longer body (by its `Content-Length`, or as
    /// it arrives) is not read further: the attempt fails as a response that is not the
    /// operation's (ambiguous for a write, so a settlement stays journaled and is retried).
    pub max_response_bytes: usize,
}

impl Config {
    /// A configuration with default timeouts and journal settings.
    pub fn new(base_url: impl Into<String>, api_key: impl Into<Secret>) -> Config {
        Config {
            base_url: base_url.into(),
            api_key: api_key.into(),
            tenant: None,
            default_unit: None,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            journal: JournalConfig::default(),
            max_concurrent_requests: DEFAULT_MAX_CONCURRENT_REQUESTS,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        }
    }

    /// Sets the response body bound (validated by [`Config::validate`]: at least 1).
    pub fn with_max_response_bytes(mut self, n: usize) -> Config {
        self.max_response_bytes = n;
        self
    }

    /// Sets the in-flight request bound (validated by [`Config::validate`]: at least 1).
    pub fn with_max_concurrent_requests(mut self, n: usize) -> Config {
        self.max_concurrent_requests = n;
        self
    }

    /// Sets the unit of estimates given as bare numbers.
    pub fn with_default_unit(mut self, unit: impl Into<Unit>) -> Config {
        self.default_unit = Some(unit.into());
        self
    }

    /// The unit of an estimate given as a bare number: the configured one, else
    /// `USD_MICROCENTS`.
    pub fn unit(&self) -> Unit {
        self.default_unit.clone().unwrap_or(Unit::UsdMicrocents)
    }

    /// Sets the tenant.
    pub fn with_tenant(mut self, tenant: impl Into<String>) -> Config {
        self.tenant = Some(tenant.into());
        self
    }

    /// Sets the per-attempt request timeout (validated by [`Config::validate`]).
    pub fn with_request_timeout(mut self, d: Duration) -> Config {
        self.request_timeout = d;
        self
    }

    /// Sets the connect timeout (validated by [`Config::validate`]).
    pub fn with_connect_timeout(mut self, d: Duration) -> Config {
        self.connect_timeout = d;
        self
    }

    /// Sets the journal directory.
    pub fn with_journal_dir(mut self, dir: impl Into<PathBuf>) -> Config {
        self.journal.dir = dir.into();
        self
    }

    /// Journals to Redis at `url` instead of the directory (checked when the settlement
    /// engine starts: docs/journal.md, "Stores").
    pub fn with_journal_url(mut self, url: impl Into<String>) -> Config {
        self.journal.url = Some(url.into());
        self
    }

    /// Enables or disables the journal.
    pub fn with_journal_enabled(mut self, enabled: bool) -> Config {
        self.journal.enabled = enabled;
        self
    }

    /// Checks the configuration: a parseable http(s) base URL without query or fragment,
    /// a non-empty API key, and non-zero timeouts no longer than [`MAX_TIMEOUT`].
    pub fn validate(&self) -> Result<(), Error> {
        crate::transport::url::BaseUrl::parse(&self.base_url)?;
        if self.api_key.is_empty() {
            return Err(Error::config("the API key is empty"));
        }
        check_timeout("request timeout", self.request_timeout)?;
        check_timeout("connect timeout", self.connect_timeout)?;
        if self.max_concurrent_requests == 0 {
            return Err(Error::config("max_concurrent_requests must be at least 1"));
        }
        if self.max_response_bytes == 0 {
            return Err(Error::config("max_response_bytes must be at least 1"));
        }
        if let Some(url) = &self.journal.url {
            crate::journal::redis_store::RedisTarget::parse(url).map_err(Error::config)?;
        }
        if let Some(u) = self.default_unit.as_ref().filter(|u| !u.is_known()) {
            // A misspelt unit would otherwise reach the server on every guarded call.
            return Err(Error::config(format!(
                "the default unit must be USD_MICROCENTS, TOKENS, CREDITS or RISK_POINTS, not {:?}",
                u.as_str()
            )));
        }
        Ok(())
    }

    /// Reads the configuration from the process environment; see [`Config::from_lookup`].
    pub fn from_env() -> Result<Config, Error> {
        Config::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the configuration through `lookup` (tests pass a map instead of mutating the
    /// process environment, which is racy in multi-threaded test runners).
    ///
    /// | variable | meaning | default |
    /// |---|---|---|
    /// | `CYCLES_BASE_URL` | server root without `/v1` | required |
    /// | `CYCLES_API_KEY` | API key | required |
    /// | `CYCLES_TENANT` | tenant | none |
    /// | `CYCLES_UNIT` | unit of estimates given as bare numbers | `USD_MICROCENTS` |
    /// | `CYCLES_REQUEST_TIMEOUT_MS` | request timeout, integer milliseconds > 0 | 10000 |
    /// | `CYCLES_CONNECT_TIMEOUT_MS` | connect timeout, integer milliseconds > 0 | 5000 |
    /// | `CYCLES_MAX_CONCURRENT_REQUESTS` | in-flight request bound, integer > 0 | 256 |
    /// | `CYCLES_MAX_RESPONSE_BYTES` | response body bound, integer > 0 | 1048576 |
    /// | `CYCLES_JOURNAL_DIR` | journal directory | `$HOME/.runcycles/commit-journal` |
    /// | `CYCLES_JOURNAL_ENABLED` | `true`/`false`/`1`/`0` | `true` |
    /// | `CYCLES_JOURNAL_URL` | a Redis journal instead of the directory (`redis://...`) | none |
    ///
    /// Empty values count as unset. Errors name the variable; the API key value is never
    /// included in any error.
    pub fn from_lookup<F>(lookup: F) -> Result<Config, Error>
    where
        F: Fn(&str) -> Option<String>,
    {
        let get = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        let base_url =
            get("CYCLES_BASE_URL").ok_or_else(|| Error::config("CYCLES_BASE_URL is not set"))?;
        crate::transport::url::BaseUrl::parse(base_url.trim())
            .map_err(|e| Error::config(format!("CYCLES_BASE_URL is invalid: {}", e.message())))?;
        let api_key =
            get("CYCLES_API_KEY").ok_or_else(|| Error::config("CYCLES_API_KEY is not set"))?;
        let mut cfg = Config::new(base_url.trim(), api_key);
        cfg.tenant = get("CYCLES_TENANT").map(|t| t.trim().to_string());
        cfg.default_unit = get("CYCLES_UNIT").map(|u| Unit::from(u.trim().to_string()));
        if let Some(v) = get("CYCLES_REQUEST_TIMEOUT_MS") {
            cfg.request_timeout = parse_ms("CYCLES_REQUEST_TIMEOUT_MS", &v)?;
        }
        if let Some(v) = get("CYCLES_CONNECT_TIMEOUT_MS") {
            cfg.connect_timeout = parse_ms("CYCLES_CONNECT_TIMEOUT_MS", &v)?;
        }
        if let Some(v) = get("CYCLES_MAX_CONCURRENT_REQUESTS") {
            cfg.max_concurrent_requests = match v.trim().parse::<usize>() {
                Ok(n) if n > 0 => n,
                _ => {
                    return Err(Error::config(format!(
                        "CYCLES_MAX_CONCURRENT_REQUESTS must be a positive integer, got {v:?}"
                    )))
                }
            };
        }
        if let Some(v) = get("CYCLES_MAX_RESPONSE_BYTES") {
            cfg.max_response_bytes = match v.trim().parse::<usize>() {
                Ok(n) if n > 0 => n,
                _ => {
                    return Err(Error::config(format!(
                        "CYCLES_MAX_RESPONSE_BYTES must be a positive integer, got {v:?}"
                    )))
                }
            };
        }
        cfg.journal.dir = match get("CYCLES_JOURNAL_DIR") {
            Some(d) => PathBuf::from(d),
            None => JournalConfig::default_dir(lookup("HOME").as_deref()),
        };
        cfg.journal.url = get("CYCLES_JOURNAL_URL").map(|u| u.trim().to_string());
        if let Some(v) = get("CYCLES_JOURNAL_ENABLED") {
            cfg.journal.enabled = match v.trim().to_ascii_lowercase().as_str() {
                "1" | "true" | "yes" | "on" => true,
                "0" | "false" | "no" | "off" => false,
                _ => {
                    return Err(Error::config(format!(
                        "CYCLES_JOURNAL_ENABLED must be true or false, got {v:?}"
                    )))
                }
            };
        }
        Ok(cfg)
    }
}

fn check_timeout(what: &str, d: Duration) -> Result<(), Error> {
    if d.is_zero() {
        return Err(Error::config(format!("the {what} must be greater than 0")));
    }
    if d > MAX_TIMEOUT {
        return Err(Error::config(format!(
            "the {what} must be at most {} ms",
            MAX_TIMEOUT.as_millis()
        )));
    }
    Ok(())
}

fn parse_ms(name: &str, v: &str) -> Result<Duration, Error> {
    let t = v.trim();
    let ms: u64 = t
        .parse()
        .ok()
        .filter(|_| t.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(|| {
            Error::config(format!(
                "{name} must be a whole number of milliseconds, got {v:?}"
            ))
        })?;
    let d = Duration::from_millis(ms);
    check_timeout(name, d).map_err(|_| {
        Error::config(format!(
            "{name} must be between 1 and {} milliseconds, got {ms}",
            MAX_TIMEOUT.as_millis()
        ))
    })?;
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;
    use std::collections::HashMap;

    const KEY: &str = "sk-very-secret-value";

    fn lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    fn base() -> Vec<(&'static str, &'static str)> {
        vec![
            ("CYCLES_BASE_URL", "http://127.0.0.1:7878"),
            ("CYCLES_API_KEY", KEY),
            ("HOME", "/home/u"),
        ]
    }

    #[test]
    fn reads_all_variables() {
        let mut v = base();
        v.extend([
            ("CYCLES_TENANT", "acme"),
            ("CYCLES_REQUEST_TIMEOUT_MS", "1500"),
            ("CYCLES_CONNECT_TIMEOUT_MS", "250"),
            ("CYCLES_JOURNAL_DIR", "/var/j"),
            ("CYCLES_JOURNAL_ENABLED", "false"),
        ]);
        let c = Config::from_lookup(lookup(&v)).unwrap();
        assert_eq!(c.base_url, "http://127.0.0.1:7878");
        assert_eq!(c.api_key.expose(), KEY);
        assert_eq!(c.tenant.as_deref(), Some("acme"));
        assert_eq!(c.request_timeout, Duration::from_millis(1500));
        assert_eq!(c.connect_timeout, Duration::from_millis(250));
        assert_eq!(c.journal.dir, PathBuf::from("/var/j"));
        assert!(!c.journal.enabled);
        c.validate().unwrap();
    }

    #[test]
    fn defaults() {
        let c = Config::from_lookup(lookup(&base())).unwrap();
        assert_eq!(c.request_timeout, DEFAULT_REQUEST_TIMEOUT);
        assert_eq!(c.connect_timeout, DEFAULT_CONNECT_TIMEOUT);
        assert_eq!(
            c.journal.dir,
            PathBuf::from("/home/u/.runcycles/commit-journal")
        );
        assert!(c.journal.enabled);
        assert_eq!(c.tenant, None);
    }

    #[test]
    fn errors_name_the_variable_and_never_the_key() {
        let cases = [
            ("CYCLES_REQUEST_TIMEOUT_MS", "0"),
            ("CYCLES_REQUEST_TIMEOUT_MS", "1.5"),
            ("CYCLES_REQUEST_TIMEOUT_MS", "-3"),
            ("CYCLES_REQUEST_TIMEOUT_MS", "5s"),
            ("CYCLES_REQUEST_TIMEOUT_MS", "999999999999999999999"),
            ("CYCLES_CONNECT_TIMEOUT_MS", "0"),
            ("CYCLES_CONNECT_TIMEOUT_MS", "abc"),
            ("CYCLES_JOURNAL_ENABLED", "maybe"),
            ("CYCLES_BASE_URL", "not a url"),
            ("CYCLES_BASE_URL", "ftp://x"),
        ];
        for (name, value) in cases {
            let mut v = base();
            v.retain(|(k, _)| *k != name);
            v.push((name, value));
            let e = Config::from_lookup(lookup(&v)).unwrap_err();
            assert_eq!(e.kind(), &ErrorKind::Config);
            let shown = format!("{e} {e:?}");
            assert!(shown.contains(name), "{shown}");
            assert!(!shown.contains(KEY), "{shown}");
        }
        for missing in ["CYCLES_BASE_URL", "CYCLES_API_KEY"] {
            let mut v = base();
            v.retain(|(k, _)| *k != missing);
            let e = Config::from_lookup(lookup(&v)).unwrap_err();
            assert!(e.to_string().contains(missing));
        }
    }

    #[test]
    fn key_never_in_debug() {
        let c = Config::new("http://x", KEY).with_tenant("t");
        let d = format!("{c:?}");
        assert!(!d.contains(KEY), "{d}");
        assert!(d.contains("redacted"));
    }

    #[test]
    fn default_unit_from_code_and_env() {
        assert_eq!(Config::new("http://x", "k").unit(), Unit::UsdMicrocents);
        let c = Config::new("http://x", "k").with_default_unit(Unit::Tokens);
        assert_eq!((c.unit(), c.validate().is_ok()), (Unit::Tokens, true));
        let e = Config::new("http://x", "k")
            .with_default_unit("TOKEN")
            .validate()
            .unwrap_err();
        assert_eq!(e.kind(), &ErrorKind::Config);
        assert!(e.message().contains("not \"TOKEN\""), "{}", e.message());
        let env = |name: &str| match name {
            "CYCLES_BASE_URL" => Some("http://x".to_string()),
            "CYCLES_API_KEY" => Some("k".to_string()),
            "CYCLES_UNIT" => Some(" TOKENS ".to_string()),
            _ => None,
        };
        assert_eq!(Config::from_lookup(env).unwrap().unit(), Unit::Tokens);
    }

    #[test]
    fn validate_rejects_zero_and_huge_timeouts() {
        let c = Config::new("http://x", "k").with_request_timeout(Duration::ZERO);
        assert_eq!(c.validate().unwrap_err().kind(), &ErrorKind::Config);
        let c = Config::new("http://x", "k").with_connect_timeout(Duration::ZERO);
        assert!(c.validate().is_err());
        let c = Config::new("http://x", "k").with_request_timeout(MAX_TIMEOUT * 2);
        assert!(c.validate().is_err());
        assert!(Config::new("http://x", "").validate().is_err());
        assert!(Config::new("http://x/p/", "k").validate().is_ok());
    }
}
