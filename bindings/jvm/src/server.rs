//! `dev.cycles.LocalServer`'s native half: `cycles-local-server` in-process on core's runtime,
//! for users' own tests (loopback only; not for production).

use std::sync::Mutex;

use cycles_bridge::ErrorFields;
use cycles_core::runtime;
use cycles_local_server::{FaultRule, LocalServer, ServerConfig};
use jni::objects::{JClass, JString};
use jni::sys::{jlong, jstring};
use jni::JNIEnv;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};

use crate::entry::{entry, jstr, opt_string, string};
use crate::handles;

struct Server(Mutex<Option<LocalServer>>);

fn with<T>(id: jlong, f: impl FnOnce(&LocalServer) -> T) -> Result<T, ErrorFields> {
    let s = handles::get::<Server>(id, "local server")?;
    let guard = s.0.lock().unwrap_or_else(|p| p.into_inner());
    match guard.as_ref() {
        Some(s) => Ok(f(s)),
        None => Err(handles::gone("local server")),
    }
}

fn to_json<T: serde::Serialize>(v: &T) -> Result<String, ErrorFields> {
    serde_json::to_string(v).map_err(|e| ErrorFields::internal(format!("cannot encode: {e}")))
}

/// `text` as a `T`, refusing members `T` does not have. The server's types default every
/// member and ignore unknown ones, so a misspelt key (`"budget"`, `"alocated"`) would
/// otherwise start a server with the default instead: the decoded value, encoded again, has
/// every member `T` knows, so a given key missing from it is one serde skipped.
fn strict<T: DeserializeOwned + Serialize>(text: &str, what: &str) -> Result<T, ErrorFields> {
    let invalid = |e: String| ErrorFields::invalid(format!("invalid {what}: {e}"));
    let given: Value = serde_json::from_str(text).map_err(|e| invalid(e.to_string()))?;
    let decoded: T = serde_json::from_value(given.clone()).map_err(|e| invalid(e.to_string()))?;
    let known = serde_json::to_value(&decoded).map_err(|e| invalid(e.to_string()))?;
    match unknown_key(&given, &known, "") {
        Some(key) => Err(invalid(format!("unknown key {key:?}"))),
        None => Ok(decoded),
    }
}

/// The path (`budgets[0].alocated`) of the first member of `given` that `known` lacks.
fn unknown_key(given: &Value, known: &Value, path: &str) -> Option<String> {
    match (given, known) {
        (Value::Object(g), Value::Object(k)) => g.iter().find_map(|(key, v)| {
            let at = if path.is_empty() {
                key.clone()
            } else {
                format!("{path}.{key}")
            };
            match k.get(key) {
                None => Some(at),
                Some(kv) => unknown_key(v, kv, &at),
            }
        }),
        (Value::Array(g), Value::Array(k)) => g
            .iter()
            .zip(k)
            .enumerate()
            .find_map(|(i, (v, kv))| unknown_key(v, kv, &format!("{path}[{i}]"))),
        _ => None,
    }
}

/// Starts a server on 127.0.0.1 (blocking); `config` null: defaults (tenant `acme`, key
/// `cycles-local-key`), else a `ServerConfig` as JSON in which an unknown key is
/// INVALID_ARGUMENT naming it. Returns `{"id", "url", "api_key", "tenant"}`.
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_serverStart<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    config: JString<'l>,
) -> jstring {
    entry(&mut env, std::ptr::null_mut(), |env| {
        let config: ServerConfig = match opt_string(env, &config)? {
            Some(j) => strict(&j, "server config")?,
            None => ServerConfig::default(),
        };
        let first = config.tenants.first();
        let tenant = first.map(|t| t.id.clone()).unwrap_or_default();
        let api_key = first
            .and_then(|t| t.api_keys.first().cloned())
            .unwrap_or_default();
        let rt = runtime::handle()?;
        let server = rt
            .block_on(LocalServer::start(config))
            .map_err(|e| ErrorFields::invalid(format!("cannot start the local server: {e}")))?;
        let url = server.url();
        let id = handles::put(Server(Mutex::new(Some(server))));
        let info = json!({"id": id, "url": url, "api_key": api_key, "tenant": tenant});
        jstr(env, &info.to_string())
    })
}

/// The ledger (`"ledger"`) or the received requests (`"requests"`) as JSON.
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_serverDump<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    id: jlong,
    what: JString<'l>,
) -> jstring {
    entry(&mut env, std::ptr::null_mut(), |env| {
        let what = string(env, &what, "what")?;
        let text = match what.as_str() {
            "ledger" => with(id, |s| to_json(&s.ledger()))??,
            "requests" => with(id, |s| to_json(&s.requests()))??,
            other => return Err(ErrorFields::invalid(format!("unknown dump {other:?}"))),
        };
        jstr(env, &text)
    })
}

/// Adds a scripted fault (a `FaultRule` as JSON, unknown keys refused); null clears every
/// fault.
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_serverFault<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    id: jlong,
    rule: JString<'l>,
) {
    entry(&mut env, (), |env| match opt_string(env, &rule)? {
        Some(r) => {
            let rule: FaultRule = strict(&r, "fault rule")?;
            with(id, |s| s.add_fault(rule))
        }
        None => with(id, |s| s.clear_faults()),
    })
}

/// Moves the server's clock forward by `ms`.
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_serverAdvanceClock<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    id: jlong,
    ms: jlong,
) {
    entry(&mut env, (), |_| {
        let ms = u64::try_from(ms).map_err(|_| ErrorFields::invalid("ms must not be negative"))?;
        with(id, |s| s.advance_clock(ms))
    })
}

/// Stops the server (blocking, idempotent) and frees its id.
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_serverStop<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    id: jlong,
) {
    entry(&mut env, (), |_| {
        let Ok(s) = handles::get::<Server>(id, "local server") else {
            return Ok(());
        };
        handles::free(id);
        let server = s.0.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(server) = server {
            runtime::handle()?.block_on(server.shutdown());
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_are_named_with_their_path() {
        let ok = r#"{"budgets":[{"scope":"tenant:acme","unit":"TOKENS","allocated":5}],"mode":"reference"}"#;
        let c: ServerConfig = strict(ok, "server config").unwrap();
        assert_eq!(c.budgets[0].allocated, 5);
        for (text, key) in [
            (r#"{"budget":[]}"#, "budget"),
            (
                r#"{"budgets":[{"scope":"tenant:acme"},{"alocated":5}]}"#,
                "budgets[1].alocated",
            ),
            (
                r#"{"regime":{"extend":{"kind":"grant_cap","max_grant_ms":5,"x":1}}}"#,
                "regime.extend.x",
            ),
        ] {
            let e = strict::<ServerConfig>(text, "server config").unwrap_err();
            assert_eq!(e.name, "INVALID_ARGUMENT");
            assert!(e.message.contains(key), "{text}: {}", e.message);
        }
        let rule =
            r#"{"operation":"commitReservation","time":1,"fault":{"kind":"connection_reset"}}"#;
        let e = strict::<FaultRule>(rule, "fault rule").unwrap_err();
        assert!(e.message.contains("\"time\""), "{}", e.message);
        // Malformed JSON and wrong types keep serde's message.
        let e = strict::<ServerConfig>(r#"{"evidence":"yes"}"#, "server config").unwrap_err();
        assert!(
            e.message.starts_with("invalid server config: invalid type"),
            "{}",
            e.message
        );
    }
}
