//! `dev.cycles.LocalServer`'s native half: `cycles-local-server` in-process on core's runtime,
//! for users' own tests (loopback only; not for production).

use cycles_bridge::server::Server;
use cycles_bridge::ErrorFields;
use cycles_core::runtime;
use cycles_local_server::FaultRule;
use jni::objects::{JClass, JString};
use jni::sys::{jlong, jstring};
use jni::JNIEnv;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};

use crate::entry::{entry, jstr, opt_string, string};
use crate::handles;

fn server(id: jlong) -> Result<std::sync::Arc<Server>, ErrorFields> {
    handles::get::<Server>(id, "local server")
}

/// `text` as a `T`, refusing members `T` does not have. The server's config refuses unknown
/// keys itself (the bridge's `server::parse_config`); a `FaultRule` ignores them, so a
/// misspelt fault key would otherwise script a different fault: the decoded value, encoded
/// again, has every member `T` knows, so a given key missing from it is one serde skipped.
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
/// INVALID_ARGUMENT naming it (the bridge's `server::Server`). Returns `{"id", "url",
/// "api_key", "tenant"}`.
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_serverStart<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    config: JString<'l>,
) -> jstring {
    entry(&mut env, std::ptr::null_mut(), |env| {
        let config = opt_string(env, &config)?;
        // On core's runtime (the server's tasks live there), not driven on this thread.
        let server = runtime::handle()?.block_on(Server::start(config.as_deref())?)?;
        let mut info =
            json!({"url": server.url(), "api_key": server.api_key(), "tenant": server.tenant()});
        info["id"] = json!(handles::put(server));
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
        let s = server(id)?;
        let text = match what.as_str() {
            "ledger" => s.ledger_json()?,
            "requests" => s.requests_json()?,
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
            strict::<FaultRule>(&r, "fault rule")?;
            server(id)?.add_fault(&r)
        }
        None => server(id)?.clear_faults(),
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
        server(id)?.advance_clock(ms)
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
        let Ok(s) = server(id) else {
            return Ok(());
        };
        handles::free(id);
        if let Some(work) = s.stop() {
            runtime::handle()?.block_on(work);
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_fault_keys_are_named() {
        let rule =
            r#"{"operation":"commitReservation","time":1,"fault":{"kind":"connection_reset"}}"#;
        let e = strict::<FaultRule>(rule, "fault rule").unwrap_err();
        assert_eq!(e.name, "INVALID_ARGUMENT");
        assert!(e.message.contains("\"time\""), "{}", e.message);
        let e = strict::<FaultRule>(r#"{"fault":"x"}"#, "fault rule").unwrap_err();
        assert!(e.message.starts_with("invalid fault rule"), "{}", e.message);
    }
}
