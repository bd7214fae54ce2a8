//! `dev.cycles.Pricing`'s native half: core's pure pricing functions through the bridge's
//! `pricing_json` (the shared vectors' encoding: `conformance/vectors/pricing.json`).

use cycles_bridge::pricing_json;

use crate::entry::{jstr, string};

natives! {
    /// One pure pricing function by name, arguments and result as JSON.
    fn pricingCall(env, name: JString, args_json: JString) -> jstring {
        let name = string(env, &name, "name")?;
        let out = pricing_json::call(&name, &string(env, &args_json, "args")?)?;
        jstr(env, &out)
    }
}
