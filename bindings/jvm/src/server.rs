//! `dev.cycles.LocalServer`'s native half: `cycles-local-server` in-process on core's runtime,
//! for users' own tests (loopback only; not for production).

use cycles_bridge::server::Server;
use cycles_bridge::ErrorFields;
use cycles_core::runtime;
use jni::sys::jlong;
use serde_json::json;

use crate::entry::{jstr, opt_string, string};
use crate::handles;

fn server_of(id: jlong) -> Result<std::sync::Arc<Server>, ErrorFields> {
    handles::get::<Server>(id, "local server")
}

natives! {
    /// Starts a server on 127.0.0.1 (blocking); `config` null: defaults (tenant `acme`, key
    /// `cycles-local-key`), else a `ServerConfig` as JSON in which an unknown key is
    /// INVALID_ARGUMENT naming it (the bridge's `server::Server`). Returns `{"id", "url",
    /// "api_key", "tenant"}`.
    fn serverStart(env, config_json: JString) -> jstring {
        let config = opt_string(env, &config_json)?;
        // On core's runtime (the server's tasks live there), not driven on this thread.
        let server = runtime::handle()?.block_on(Server::start(config.as_deref())?)?;
        let mut info =
            json!({"url": server.url(), "api_key": server.api_key(), "tenant": server.tenant()});
        info["id"] = json!(handles::put(server));
        jstr(env, &info.to_string())
    }

    /// The ledger (`"ledger"`) or the received requests (`"requests"`) as JSON.
    fn serverDump(env, server: jlong, what: JString) -> jstring {
        let what = string(env, &what, "what")?;
        let s = server_of(server)?;
        let text = match what.as_str() {
            "ledger" => s.ledger_json()?,
            "requests" => s.requests_json()?,
            other => return Err(ErrorFields::invalid(format!("unknown dump {other:?}"))),
        };
        jstr(env, &text)
    }

    /// Adds a scripted fault (a `FaultRule` as JSON, unknown keys refused); null clears every
    /// fault.
    fn serverFault(env, server: jlong, rule_json: JString) {
        match opt_string(env, &rule_json)? {
            Some(r) => server_of(server)?.add_fault(&r),
            None => server_of(server)?.clear_faults(),
        }
    }

    /// Moves the server's clock forward by `ms`.
    fn serverAdvanceClock(_env, server: jlong, ms: jlong) {
        let ms = u64::try_from(ms).map_err(|_| ErrorFields::invalid("ms must not be negative"))?;
        server_of(server)?.advance_clock(ms)
    }

    /// Stops the server (blocking, idempotent) and frees its id.
    fn serverStop(_env, server: jlong) {
        let Ok(s) = server_of(server) else {
            return Ok(());
        };
        handles::free(server);
        if let Some(work) = s.stop() {
            runtime::handle()?.block_on(work);
        }
        Ok(())
    }
}
