//! `dev.cycles.Journal`'s native half: core's journal helpers (identity partition, file
//! names, record parsing, the pending scan), unchanged.

use cycles_bridge::journal_json;
use cycles_core::journal::{identity, names};
use jni::sys::JNI_TRUE;

use crate::entry::{jni_err, jstr, opt_string, string};

natives! {
    /// The identity partition (`fp16`) of (base URL, API key, tenant or null).
    fn journalFingerprint(env, base_url: JString, api_key: JString, tenant: JString) -> jstring {
        let b = string(env, &base_url, "base_url")?;
        let k = string(env, &api_key, "api_key")?;
        let t = opt_string(env, &tenant)?;
        jstr(env, &identity::partition(&b, &k, t.as_deref()))
    }

    /// The record file name of a reservation (`legacy`: the pre-v2 name).
    fn journalFileName(env, reservation_id: JString, legacy: jboolean) -> jstring {
        let r = string(env, &reservation_id, "reservation_id")?;
        let name = if legacy == JNI_TRUE {
            names::legacy_file_name(&r)
        } else {
            names::record_file_name(&r)
        };
        jstr(env, &name)
    }

    /// Parses a record file's bytes: the record JSON (bodies as exact text).
    fn journalParseRecord(env, data: JByteArray) -> jstring {
        if data.is_null() {
            return Err(cycles_bridge::ErrorFields::invalid("data must not be null"));
        }
        let bytes = env.convert_byte_array(&data).map_err(jni_err)?;
        let out = journal_json::parse_record(&bytes)?;
        jstr(env, &out)
    }

    /// The valid pending records in `dir` (a directory, or a `redis://` URL; of one identity,
    /// or of all when `base_url` and `api_key` are null) as a JSON array.
    fn journalPending(
        env,
        dir: JString,
        base_url: JString,
        api_key: JString,
        tenant: JString,
    ) -> jstring {
        let d = string(env, &dir, "dir")?;
        let b = opt_string(env, &base_url)?;
        let k = opt_string(env, &api_key)?;
        let t = opt_string(env, &tenant)?;
        let out = journal_json::pending(&d, b.as_deref(), k.as_deref(), t.as_deref())?;
        jstr(env, &out)
    }
}
