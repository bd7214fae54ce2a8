//! `client_of_options` on the `CYCLES_*` environment (its own test binary: the one test here
//! sets process variables, which no other test in this process reads).

use std::time::Duration;

use cycles_bridge::args::Args;
use cycles_bridge::{client_of_options, Connection};

#[test]
fn environment_then_options_over_it() {
    for (name, value) in [
        ("CYCLES_BASE_URL", "http://127.0.0.1:1"),
        ("CYCLES_API_KEY", "env-key"),
        ("CYCLES_TENANT", "env-tenant"),
        ("CYCLES_UNIT", "CREDITS"),
    ] {
        std::env::set_var(name, value);
    }
    let args = |t: &str| Args::parse(t, "options").unwrap();
    let (c, _) = client_of_options(&args("{}"), Connection::Env).unwrap();
    let cfg = c.config();
    assert_eq!(
        (cfg.tenant.as_deref(), cfg.unit().as_str()),
        (Some("env-tenant"), "CREDITS")
    );
    let (c, settle) = client_of_options(
        &args(
            r#"{"tenant": "t2", "default_unit": "TOKENS", "request_timeout_ms": 1234,
                "connect_timeout_ms": 567, "max_concurrent_requests": 3,
                "journal_enabled": false, "settle_max_attempts": 2}"#,
        ),
        Connection::Env,
    )
    .unwrap();
    let cfg = c.config();
    assert_eq!(cfg.base_url, "http://127.0.0.1:1");
    assert_eq!(
        (cfg.tenant.as_deref(), cfg.unit().as_str()),
        (Some("t2"), "TOKENS")
    );
    assert_eq!(cfg.request_timeout, Duration::from_millis(1234));
    assert_eq!(cfg.connect_timeout, Duration::from_millis(567));
    assert_eq!(cfg.max_concurrent_requests, 3);
    assert!(!cfg.journal.enabled);
    assert_eq!(settle.max_attempts, Some(2));
    let e = client_of_options(&args(r#"{"base_url": "http://x"}"#), Connection::Env)
        .err()
        .unwrap();
    assert!(
        e.message.starts_with("unknown option \"base_url\""),
        "{}",
        e.message
    );
}
