//! `cycles fake-provider` as a user runs it: the real binary, its banner, real HTTP to it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

fn cycles() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cycles"))
}

fn post(addr: &str, path: &str, body: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

#[test]
fn fake_provider_prints_its_url_and_answers() {
    let mut child = cycles()
        .args([
            "fake-provider",
            "--port",
            "0",
            "--model-reply",
            "m=two words",
        ])
        .args([
            "--fault",
            r#"{"call":1,"fault":{"kind":"rate_limited","retry_after":"3"}}"#,
        ])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start fake-provider");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let url = first.rsplit(' ').next().unwrap().to_string();
    assert!(
        first.starts_with("cycles fake provider listening on http://127.0.0.1:"),
        "{first}"
    );
    assert!(lines
        .next()
        .unwrap()
        .unwrap()
        .contains(&format!("{url}/v1")));
    let addr = url.trim_start_matches("http://");
    let body = r#"{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi there"}]}"#;
    let ok = post(addr, "/v1/messages", body);
    let limited = post(addr, "/v1/messages", body);
    let log = {
        let mut stream = TcpStream::connect(addr).unwrap();
        write!(
            stream,
            "GET /_fake/requests HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut text = String::new();
        stream.read_to_string(&mut text).unwrap();
        text
    };
    child.kill().ok();
    child.wait().ok();
    assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
    assert!(ok.contains(r#""text":"two words""#), "{ok}");
    assert!(
        ok.contains(r#""input_tokens":2"#) && ok.contains(r#""output_tokens":2"#),
        "{ok}"
    );
    assert!(limited.starts_with("HTTP/1.1 429"), "{limited}");
    assert!(
        limited.to_ascii_lowercase().contains("retry-after: 3"),
        "{limited}"
    );
    assert!(
        log.contains(r#""output_bound":5"#) && log.contains(r#""fault":"rate_limited""#),
        "{log}"
    );
}

#[test]
fn fake_provider_refuses_unknown_config_keys() {
    let dir = std::env::temp_dir().join(format!("cycles-fake-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("fake.json");
    std::fs::write(
        &file,
        r#"{"reply": "x", "faults": [{"fault": {"kind": "server_error", "code": 1}}]}"#,
    )
    .unwrap();
    let out = cycles()
        .args(["fake-provider", "--port", "0", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).ok();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("invalid fake provider config") && err.contains("unknown field `code`"),
        "{err}"
    );
    let out = cycles()
        .args([
            "fake-provider",
            "--fault",
            r#"{"fault":{"kind":"cut_stream"}}"#,
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("after_chunks"));
    let help = cycles().args(["fake-provider", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("Tokens are words") && help.contains("/_fake/requests"),
        "{help}"
    );
}
