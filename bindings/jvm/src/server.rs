//! `dev.cycles.LocalServer`'s native half: `cycles-local-server` in-process on core's runtime,
//! for users' own tests (loopback only; not for production).

use std::sync::Mutex;

use cycles_bridge::ErrorFields;
use cycles_core::runtime;
use cycles_local_server::{FaultRule, LocalServer, ServerConfig};
use jni::objects::{JClass, JString};
use jni::sys::{jlong, jstring};
use jni::JNIEnv;
use serde_json::json;

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

/// Starts a server on 127.0.0.1 (blocking); `config` null: defaults (tenant `acme`, key
/// `cycles-local-key`). Returns `{"id", "url", "api_key", "tenant"}`.
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_serverStart<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    config: JString<'l>,
) -> jstring {
    entry(&mut env, std::ptr::null_mut(), |env| {
        let config: ServerConfig = match opt_string(env, &config)? {
            Some(j) => serde_json::from_str(&j)
                .map_err(|e| ErrorFields::invalid(format!("invalid server config: {e}")))?,
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

/// Adds a scripted fault (a `FaultRule` as JSON); null clears every fault.
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_serverFault<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    id: jlong,
    rule: JString<'l>,
) {
    entry(&mut env, (), |env| match opt_string(env, &rule)? {
        Some(r) => {
            let rule: FaultRule = serde_json::from_str(&r)
                .map_err(|e| ErrorFields::invalid(format!("invalid fault rule: {e}")))?;
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
