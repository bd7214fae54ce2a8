//! `dev.cycles.Pricing`'s native half: core's pure pricing functions through the bridge's
//! `pricing_json` (the shared vectors' encoding: `conformance/vectors/pricing.json`).

use cycles_bridge::pricing_json;
use jni::objects::{JClass, JString};
use jni::sys::jstring;
use jni::JNIEnv;

use crate::entry::{entry, jstr, string};

/// One pure pricing function by name, arguments and result as JSON.
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_pricingCall<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    name: JString<'l>,
    args: JString<'l>,
) -> jstring {
    entry(&mut env, std::ptr::null_mut(), |env| {
        let out = pricing_json::call(&string(env, &name, "name")?, &string(env, &args, "args")?)?;
        jstr(env, &out)
    })
}
