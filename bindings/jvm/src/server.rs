//! `dev.cycles.LocalServer`'s native half: `cycles-local-server` in-process on core's runtime,
//! for users' own tests (loopback only; not for production).

use cycles_bridge::server::Server;
use cycles_bridge::ErrorFields;
use cycles_core::runtime;
use jni::objects::{JClass, JString};
use jni::sys::{jlong, jstring};
use jni::JNIEnv;
use serde_json::json;

use crate::entry::{entry, jstr, opt_string, string};
use crate::handles;

fn server(id: jlong) -> Result<std::sync::Arc<Server>, ErrorFields> {
    handles::get::<Server>(id, "local server")
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
        Some(r) => server(id)?.add_fault(&r),
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
