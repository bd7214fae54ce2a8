//! `CyclesClient.decodeCaptured`'s native half: one captured HTTP response through core's own
//! response path (the bridge's `decode_captured`), without a network. The reference-server
//! corpus runs through it in Java; users can check their own captures the same way.

use cycles_bridge::{decode_captured, headers_from_json, ErrorFields};

use crate::entry::{jni_err, jstr, opt_string};

natives! {
    /// Decodes one captured response as the client would: the reply JSON of a schema-valid
    /// success, else the client's exception is thrown. `operation` null: the response matched
    /// no operation (only valid for a non-2xx status).
    fn decodeCaptured(
        env,
        operation: JString,
        status: jint,
        headers_json: JString,
        body: JByteArray,
    ) -> jstring {
        let op = opt_string(env, &operation)?;
        let status = u16::try_from(status)
            .map_err(|_| ErrorFields::invalid(format!("status {status} is not an HTTP status")))?;
        let owned = headers_from_json(opt_string(env, &headers_json)?.as_deref(), "headersJson")?;
        let pairs: Vec<(&str, &str)> = owned
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let bytes = if body.is_null() {
            Vec::new()
        } else {
            env.convert_byte_array(&body).map_err(jni_err)?
        };
        let reply = decode_captured(op.as_deref(), status, &pairs, &bytes)?;
        jstr(env, &reply.to_json())
    }
}
