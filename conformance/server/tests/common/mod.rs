//! Shared helpers for the HTTP-level tests: a real server on loopback and a reqwest client.
#![allow(dead_code)]

use cycles_local_server::{LocalServer, ServerConfig};
use reqwest::header::HeaderMap;
use serde_json::{json, Value};

pub const KEY: &str = "cycles-local-key";
pub const ADMIN: &str = "cycles-local-admin";

pub struct H {
    pub server: LocalServer,
    pub c: reqwest::Client,
    pub url: String,
}

pub struct Resp {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Value,
}

impl Resp {
    pub fn code(&self) -> &str {
        self.body["error"].as_str().unwrap_or("")
    }
}

impl H {
    pub async fn new() -> H {
        H::with(ServerConfig::default()).await
    }

    pub async fn with(cfg: ServerConfig) -> H {
        let server = LocalServer::start(cfg).await.expect("server starts");
        let url = server.url();
        H {
            server,
            c: reqwest::Client::new(),
            url,
        }
    }

    pub async fn send(&self, rb: reqwest::RequestBuilder) -> Resp {
        let r = rb.send().await.expect("request succeeds");
        let status = r.status().as_u16();
        let headers = r.headers().clone();
        let text = r.text().await.unwrap_or_default();
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Resp {
            status,
            headers,
            body,
        }
    }

    pub async fn post_as(&self, key: Option<&str>, path: &str, body: &Value) -> Resp {
        let mut rb = self.c.post(format!("{}{}", self.url, path)).json(body);
        if let Some(k) = key {
            rb = rb.header("X-Cycles-API-Key", k);
        }
        self.send(rb).await
    }

    pub async fn post(&self, path: &str, body: &Value) -> Resp {
        self.post_as(Some(KEY), path, body).await
    }

    pub async fn get_as(&self, key: Option<&str>, path: &str) -> Resp {
        let mut rb = self.c.get(format!("{}{}", self.url, path));
        if let Some(k) = key {
            rb = rb.header("X-Cycles-API-Key", k);
        }
        self.send(rb).await
    }

    pub async fn get(&self, path: &str) -> Resp {
        self.get_as(Some(KEY), path).await
    }

    /// Live reserve with extra fields merged in; asserts 200 and returns the body.
    pub async fn reserve(&self, key: &str, amount: i64, extra: Value) -> Value {
        let r = self
            .post("/v1/reservations", &reserve_body(key, amount, extra))
            .await;
        assert_eq!(r.status, 200, "reserve failed: {}", r.body);
        r.body
    }

    /// Live reserve; returns the reservation id.
    pub async fn reserve_id(&self, key: &str, amount: i64, extra: Value) -> String {
        self.reserve(key, amount, extra).await["reservation_id"]
            .as_str()
            .unwrap()
            .to_string()
    }

    pub async fn commit(&self, rid: &str, key: &str, amount: i64) -> Resp {
        self.post(
            &format!("/v1/reservations/{rid}/commit"),
            &json!({"idempotency_key": key, "actual": usd(amount)}),
        )
        .await
    }

    pub async fn release(&self, rid: &str, key: &str) -> Resp {
        self.post(
            &format!("/v1/reservations/{rid}/release"),
            &json!({"idempotency_key": key}),
        )
        .await
    }

    pub async fn extend(&self, rid: &str, key: &str, by: i64) -> Resp {
        self.post(
            &format!("/v1/reservations/{rid}/extend"),
            &json!({"idempotency_key": key, "extend_by_ms": by}),
        )
        .await
    }

    /// The balance row for `scope` (USD) from GET /v1/balances.
    pub async fn balance(&self, scope: &str) -> Value {
        let r = self.get("/v1/balances?tenant=acme").await;
        assert_eq!(r.status, 200, "{}", r.body);
        r.body["balances"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["scope"] == scope)
            .cloned()
            .expect("balance row")
    }
}

pub fn usd(amount: i64) -> Value {
    json!({"unit": "USD_MICROCENTS", "amount": amount})
}

pub fn subject() -> Value {
    json!({"tenant": "acme", "workspace": "prod", "agent": "bot"})
}

pub fn action() -> Value {
    json!({"kind": "llm.completion", "name": "openai:gpt-4o-mini"})
}

pub fn reserve_body(key: &str, amount: i64, extra: Value) -> Value {
    let mut b = json!({"idempotency_key": key, "subject": subject(), "action": action(), "estimate": usd(amount)});
    if let Some(m) = extra.as_object() {
        for (k, v) in m {
            b[k] = v.clone();
        }
    }
    b
}

pub fn event_body(key: &str, amount: i64, extra: Value) -> Value {
    let mut b = json!({"idempotency_key": key, "subject": subject(), "action": action(), "actual": usd(amount)});
    if let Some(m) = extra.as_object() {
        for (k, v) in m {
            b[k] = v.clone();
        }
    }
    b
}

/// A config with one tenant-level USD budget of `allocated` and `overdraft`.
pub fn budget_cfg(allocated: i64, overdraft: i64) -> ServerConfig {
    let mut c = ServerConfig::default();
    c.budgets[0].allocated = allocated;
    c.budgets[0].overdraft_limit = overdraft;
    c
}

/// Ledger invariant on a Balance row.
pub fn assert_invariant(b: &Value) {
    let a = |k: &str| b[k]["amount"].as_i64().unwrap();
    assert_eq!(
        a("remaining"),
        a("allocated") - a("spent") - a("reserved") - a("debt"),
        "invariant broken: {b}"
    );
}
