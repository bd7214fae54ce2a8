//! `cycles-sdk/pricing`: core's pure pricing functions through the bridge's `pricing_json`
//! (one table serves every binding; `node/src/pricing.ts` types them).

use napi_derive::napi;

use crate::errors::{core, guard};

/// One pricing function by name (`pricing_json::call`'s table), its arguments a JSON object;
/// the result as JSON.
#[napi]
pub fn pricing_call(name: String, args_json: String) -> napi::Result<String> {
    guard(|| cycles_bridge::pricing_json::call(&name, &args_json).map_err(core))
}
