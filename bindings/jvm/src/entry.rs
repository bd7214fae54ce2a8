//! The boundary of every export: panics caught (the bridge's `catch`), errors thrown as the
//! Java exception that `dev.cycles.CyclesException.fromNative(String)` builds from the
//! bridge's error fields. Every export reaches it through the `natives!` macro
//! ([`crate::native`]).

use cycles_bridge::error::catch;
use cycles_bridge::task::{self, Work};
use cycles_bridge::ErrorFields;
use jni::objects::{JString, JThrowable, JValue};
use jni::sys::{jboolean, jint, jlong, jstring, JNI_FALSE};
use jni::JNIEnv;

/// What an export returns while its exception is pending (the JVM ignores it).
pub trait Pending {
    /// The placeholder value: null, 0, false, nothing.
    fn pending() -> Self;
}

impl Pending for () {
    fn pending() {}
}

impl Pending for jstring {
    fn pending() -> Self {
        std::ptr::null_mut()
    }
}

impl Pending for jlong {
    fn pending() -> Self {
        0
    }
}

impl Pending for jint {
    fn pending() -> Self {
        0
    }
}

impl Pending for jboolean {
    fn pending() -> Self {
        JNI_FALSE
    }
}

/// Runs `f` inside the bridge's panic boundary; on an error or a panic throws the Java
/// exception and returns [`Pending::pending`] (which the JVM ignores while the exception is
/// pending).
pub fn entry<'l, T: Pending>(
    env: &mut JNIEnv<'l>,
    f: impl FnOnce(&mut JNIEnv<'l>) -> Result<T, ErrorFields>,
) -> T {
    match catch(|| f(env)) {
        Ok(v) => v,
        Err(e) => {
            throw(env, &e);
            T::pending()
        }
    }
}

/// Throws `e` as the SDK's exception (a plain RuntimeException if even that fails).
pub fn throw(env: &mut JNIEnv<'_>, e: &ErrorFields) {
    // A Java exception already pending (a failed JNI call) is the one the caller sees.
    if env.exception_check().unwrap_or(true) {
        return;
    }
    let json = e.to_json().to_string();
    let built = (|| -> jni::errors::Result<()> {
        let text = env.new_string(&json)?;
        let ex = env
            .call_static_method(
                "dev/cycles/CyclesException",
                "fromNative",
                "(Ljava/lang/String;)Ljava/lang/RuntimeException;",
                &[JValue::Object(&text)],
            )?
            .l()?;
        env.throw(JThrowable::from(ex))
    })();
    if built.is_err() {
        let _ = env.exception_clear();
        let _ = env.throw_new("java/lang/RuntimeException", json);
    }
}

/// A jni failure (a pending Java exception, a bad string) as an INTERNAL error.
pub fn jni_err(e: jni::errors::Error) -> ErrorFields {
    ErrorFields::internal(format!("JNI call failed: {e}"))
}

/// A Java string argument (null: INVALID_ARGUMENT naming it).
pub fn string(env: &mut JNIEnv<'_>, s: &JString<'_>, name: &str) -> Result<String, ErrorFields> {
    if s.is_null() {
        return Err(ErrorFields::invalid(format!("{name} must not be null")));
    }
    read(env, s)
}

/// An optional Java string argument.
pub fn opt_string(env: &mut JNIEnv<'_>, s: &JString<'_>) -> Result<Option<String>, ErrorFields> {
    if s.is_null() {
        return Ok(None);
    }
    read(env, s).map(Some)
}

/// The text of a non-null `s`. `get_string` would look up `java.lang.String` and check the
/// object's class on every call (a `FindClass` per argument, a measurable part of a guarded
/// lifecycle's JNI time); every `JString` here is a parameter that `Native`'s signatures
/// declare `String`, so the JVM already guarantees it is one.
fn read(env: &mut JNIEnv<'_>, s: &JString<'_>) -> Result<String, ErrorFields> {
    // SAFETY: `s` is a non-null java.lang.String (a `String` parameter of a native method).
    let text = unsafe { env.get_string_unchecked(s) }.map_err(jni_err)?;
    Ok(text.into())
}

/// A new Java string.
pub fn jstr(env: &mut JNIEnv<'_>, s: &str) -> Result<jstring, ErrorFields> {
    Ok(env.new_string(s).map_err(jni_err)?.into_raw())
}

/// Runs `work` on core and blocks this Java thread until it ends (a panic in it is
/// INTERNAL). Java threads are never runtime workers, so blocking here is safe; a thread that
/// keeps calling has its calls driven on itself (`task::start`).
pub fn block<T: Send + 'static>(work: Work<T>) -> Result<T, ErrorFields> {
    task::start(work)?.finish()
}
