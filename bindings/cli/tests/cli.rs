//! The `cycles` command as a user runs it: the real binary, real processes, real HTTP.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

fn cycles() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cycles"))
}

#[test]
fn demo_tells_the_whole_story() {
    let out = cycles()
        .args(["demo", "--work-ms", "4500"])
        .output()
        .expect("run demo");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "demo failed: {text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for needle in [
        "1. Balances before any work",
        "ALLOW reservation",
        "extended by the ttl",
        "lease still alive",
        "COMMITTED: charged 1450000",
        "409 BUDGET_EXCEEDED",
        "pending (",
        "after the restart: 1 settled, 0 left in the journal",
        "applied that commit 1 time(s)",
        "remaining   3250000",
        "commit",
    ] {
        assert!(
            text.contains(needle),
            "demo output lacks {needle:?}:\n{text}"
        );
    }
}

#[test]
fn plan_prints_the_spec_worked_example() {
    let out = cycles()
        .args([
            "plan",
            "--remaining-ttl-ms",
            "60000",
            "--timeout-ms",
            "10000",
            "--rtt-ms",
            "1500",
        ])
        .output()
        .expect("run plan");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("retry_reserve   = 2 x 10000 ms + 3000 ms = 23000 ms"),
        "{text}"
    );
    assert!(text.contains("= 35500 ms after response receipt"), "{text}");

    let out = cycles()
        .args([
            "plan",
            "--remaining-ttl-ms",
            "60000",
            "--timeout-ms",
            "10000",
            "--rtt-ms",
            "1000",
        ])
        .args(["--fail", "429@37100:5", "--fail", "429@42200:12", "--json"])
        .output()
        .expect("run plan --json");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON output");
    assert_eq!(json["next_delay_ms"], 37000);
    assert_eq!(
        json["failures"][0]["decision"],
        "extend after 5000 ms with the same idempotency key"
    );
    assert!(json["failures"][1]["decision"]
        .as_str()
        .unwrap()
        .starts_with("stop: RateLimitBeyondWindow"));

    let out = cycles()
        .args(["plan", "--remaining-ttl-ms", "1", "--fail", "bogus@1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown failure kind"));
}

#[test]
fn plan_folds_the_current_rtt_into_the_maximum() {
    // The issue: --rtt-ms 5000 --max-rtt-ms 100 printed next_delay 52000 but "extend after
    // 25000": the printed arithmetic must use the same maximum as the decision.
    let out = cycles()
        .args([
            "plan",
            "--remaining-ttl-ms",
            "60000",
            "--timeout-ms",
            "10000",
        ])
        .args(["--rtt-ms", "5000", "--max-rtt-ms", "100", "--json"])
        .output()
        .expect("run plan");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON output");
    assert_eq!(json["safety_margin_ms"], 10_000);
    assert_eq!(json["next_delay_ms"], 25_000);
    assert_eq!(
        json["decision"],
        "extend after 25000 ms with a fresh idempotency key"
    );
}

#[test]
fn plan_shows_the_derived_timeout() {
    let run = |extra: &[&str]| {
        let out = cycles()
            .args([
                "plan",
                "--remaining-ttl-ms",
                "6000",
                "--timeout-ms",
                "10000",
            ])
            .args(["--rtt-ms", "10"])
            .args(extra)
            .output()
            .expect("run plan");
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let text = run(&[]);
    assert!(
        text.contains("extend timeout    1000 ms (derived from the lease"),
        "{text}"
    );
    assert!(text.contains("= 2990 ms after response receipt"), "{text}");
    let json: serde_json::Value = serde_json::from_str(&run(&["--json"])).unwrap();
    assert_eq!(json["timeout_source"], "derived");
    assert_eq!(json["timeout_ms"], 1000);
    assert_eq!(json["next_delay_ms"], 2990);
    // --no-derive: the spec's plain arithmetic with the configured timeout.
    let json: serde_json::Value = serde_json::from_str(&run(&["--json", "--no-derive"])).unwrap();
    assert_eq!(json["timeout_ms"], 10_000);
    assert_eq!(json["next_delay_ms"], 0);
    // Too short for any timeout: the floor and the lead that would be needed.
    let out = cycles()
        .args(["plan", "--remaining-ttl-ms", "2000", "--rtt-ms", "10"])
        .output()
        .expect("run plan");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("needs lead_floor >= 3001 ms"), "{text}");
}

#[test]
fn serve_prints_its_url_and_serves_the_seeded_tenant() {
    let mut child = cycles()
        .args([
            "serve",
            "--port",
            "0",
            "--tenant",
            "demo",
            "--api-key",
            "k1",
        ])
        .args(["--budget", "tenant:demo=TOKENS:1000"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start serve");
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let url = first.trim().rsplit(' ').next().unwrap().to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{first}");
    let mut stream = TcpStream::connect(url.trim_start_matches("http://")).unwrap();
    write!(stream, "GET /v1/balances?tenant=demo HTTP/1.1\r\nHost: x\r\nX-Cycles-API-Key: k1\r\nConnection: close\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    child.kill().ok();
    child.wait().ok();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(
        response.contains(r#""allocated":{"unit":"TOKENS","amount":1000}"#),
        "{response}"
    );

    let out = cycles()
        .args(["serve", "--extend", "grant-cap"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--extend-limit-ms"));
}

#[test]
fn serve_reads_a_config_file() {
    let dir = std::env::temp_dir().join(format!("cycles-serve-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("server.json");
    std::fs::write(
        &file,
        r#"{"tenants": [{"id": "globex", "api_keys": ["g1"]}],
            "budgets": [{"scope": "tenant:globex", "unit": "CREDITS", "allocated": 77}],
            "regime": {"emit_remaining_ttl": false}}"#,
    )
    .unwrap();
    let mut child = cycles()
        .args(["serve", "--port", "0", "--config"])
        .arg(&file)
        .stdout(Stdio::piped())
        .spawn()
        .expect("start serve");
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let addr = first
        .trim()
        .rsplit(' ')
        .next()
        .unwrap()
        .trim_start_matches("http://")
        .to_string();
    let body = r#"{"idempotency_key":"k","subject":{"tenant":"globex"},"action":{"kind":"a","name":"b"},"estimate":{"unit":"CREDITS","amount":5}}"#;
    let mut stream = TcpStream::connect(&addr).unwrap();
    write!(
        stream,
        "POST /v1/reservations HTTP/1.1\r\nHost: x\r\nX-Cycles-API-Key: g1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    child.kill().ok();
    child.wait().ok();
    std::fs::remove_dir_all(&dir).ok();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.contains(r#""decision":"ALLOW""#), "{response}");
    assert!(
        !response.contains("remaining_ttl_ms"),
        "the file's regime applies: {response}"
    );
}

#[test]
fn serve_reference_mode_speaks_like_the_reference_server() {
    let mut child = cycles()
        .args(["serve", "--port", "0", "--reference-mode"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start serve");
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let addr = first
        .trim()
        .rsplit(' ')
        .next()
        .unwrap()
        .trim_start_matches("http://")
        .to_string();
    let get = |path: &str| {
        let mut stream = TcpStream::connect(&addr).unwrap();
        write!(stream, "GET {path} HTTP/1.1\r\nHost: x\r\nX-Cycles-API-Key: cycles-local-key\r\nConnection: close\r\n\r\n").unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        response
    };
    let balances = get("/v1/balances?tenant=acme");
    let unknown = get("/v1/nope");
    child.kill().ok();
    child.wait().ok();
    assert!(balances.starts_with("HTTP/1.1 200"), "{balances}");
    assert!(balances.contains(r#""next_cursor":null"#), "{balances}");
    assert!(
        balances
            .to_ascii_lowercase()
            .contains("x-ratelimit-remaining: -1"),
        "{balances}"
    );
    assert!(unknown.starts_with("HTTP/1.1 500"), "{unknown}");
    assert!(unknown.contains("INTERNAL_ERROR"), "{unknown}");
}

/// Ctrl-C's handler is in place before the banner: SIGINT sent the moment the banner is read
/// stops `serve` and `fake-provider` cleanly (exit 0). It used to be registered only after the
/// banner was written, so a Ctrl-C in between killed the process by the signal's default
/// action (seen under load from the wheel's in-process `cycles`).
#[cfg(unix)]
#[test]
fn ctrl_c_right_after_the_banner_stops_cleanly() {
    use std::io::{BufRead, BufReader};
    for sub in [["serve", "--port", "0"], ["fake-provider", "--port", "0"]] {
        for _ in 0..25 {
            let mut child = cycles().args(sub).stdout(Stdio::piped()).spawn().unwrap();
            let mut line = String::new();
            BufReader::new(child.stdout.as_mut().unwrap())
                .read_line(&mut line)
                .unwrap();
            assert!(line.contains("listening on"), "{line}");
            let pid = libc::pid_t::try_from(child.id()).unwrap();
            // SAFETY: kill(2) on our own child's pid, which it still is (not yet waited for).
            assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
            let status = child.wait().unwrap();
            assert_eq!(status.code(), Some(0), "{sub:?}: {status:?}");
        }
    }
}
