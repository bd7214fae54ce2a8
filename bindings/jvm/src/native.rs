//! The one definition of `dev.cycles.internal.Native`: every JNI native of this library is
//! written once, in a `natives!` block, and `Native.java` is generated from those blocks.
//!
//! A block holds items that read like Rust functions whose first parameter is the env only:
//!
//! ```ignore
//! natives! {
//!     /// One operation, blocking: the reply JSON.
//!     fn clientCall(env, client: jlong, op: JString, args_json: JString) -> jstring {
//!         let call = client_of(client)?.handle.prepare(/* ... */)?;
//!         jstr(env, &block(call_work(call))??)
//!     }
//! }
//! ```
//!
//! For each item the macro emits
//! 1. the export `Java_dev_cycles_internal_Native_<name>` (`extern "system"`, the JNIEnv and
//!    the class first, then the parameters with their JNI types);
//! 2. the boundary: the body runs as a closure `|env: &mut JNIEnv| -> Result<R, ErrorFields>`
//!    inside [`crate::entry::entry`], which catches a panic (the bridge's `catch`) and throws
//!    an error as the SDK's Java exception;
//! 3. in test builds, a row of the module's `NATIVES` table: the Java name, the parameters
//!    (Java names are the Rust ones in camelCase: `args_json` is `argsJson`) and the Java
//!    types. `java_source` renders `Native.java` from the tables of every module
//!    (`MODULES`).
//!
//! The parameter and return types are the JNI types by name, each with one Java type:
//! `JString` String, `JByteArray` byte[], `jlong` long, `jint` int, `jboolean` boolean; the
//! return types `jstring` String, `jlong`, `jint`, `jboolean`, or none (void). Every native is
//! `static` (Java passes the class). Java names must be plain ASCII letters and digits: JNI
//! mangles `_` and non-ASCII characters (checked by a test).
//!
//! `java/scripts/gen-native.sh` writes `java/src/main/java/dev/cycles/internal/Native.java`
//! from the tables (through the test `native_java_is_generated`, which with
//! `CYCLES_NATIVE_JAVA_OUT=PATH` writes the rendering to PATH); `gen-native.sh --check`
//! (java/scripts/test.sh) and `cargo test -p cycles-jvm` fail when the committed file differs.

/// Defines natives of `dev.cycles.internal.Native` (see the module docs).
macro_rules! natives {
    ($(
        $(#[$meta:meta])*
        fn $name:ident($env:tt $(, $arg:ident: $ty:ident)* $(,)?) $(-> $ret:ident)? $body:block
    )*) => {
        $(
            $(#[$meta])*
            #[export_name = concat!("Java_dev_cycles_internal_Native_", stringify!($name))]
            #[allow(non_snake_case)]
            pub extern "system" fn $name<'l>(
                mut env: jni::JNIEnv<'l>,
                _class: jni::objects::JClass<'l>,
                $($arg: natives!(@rust $ty),)*
            ) -> natives!(@ret $($ret)?) {
                type Ret = natives!(@ret $($ret)?);
                type Out = Result<Ret, cycles_bridge::ErrorFields>;
                $crate::entry::entry(&mut env, |$env: &mut jni::JNIEnv<'l>| -> Out { $body })
            }
        )*

        /// This module's natives, as `Native.java` declares them.
        #[cfg(test)]
        pub const NATIVES: &[$crate::native::NativeFn] = &[$(
            $crate::native::NativeFn {
                name: stringify!($name),
                params: &[$((stringify!($arg), natives!(@java $ty)),)*],
                ret: natives!(@java $($ret)?),
                file: file!(),
            },
        )*];
    };

    // The Rust type of a parameter.
    (@rust JString) => { jni::objects::JString<'_> };
    (@rust JByteArray) => { jni::objects::JByteArray<'_> };
    (@rust jlong) => { jni::sys::jlong };
    (@rust jint) => { jni::sys::jint };
    (@rust jboolean) => { jni::sys::jboolean };

    // The Rust return type.
    (@ret) => { () };
    (@ret jstring) => { jni::sys::jstring };
    (@ret jlong) => { jni::sys::jlong };
    (@ret jint) => { jni::sys::jint };
    (@ret jboolean) => { jni::sys::jboolean };

    // The Java type of a parameter or return type.
    (@java) => { "void" };
    (@java JString) => { "String" };
    (@java jstring) => { "String" };
    (@java JByteArray) => { "byte[]" };
    (@java jlong) => { "long" };
    (@java jint) => { "int" };
    (@java jboolean) => { "boolean" };
}

/// One native as Java declares it.
#[cfg(test)]
#[derive(Debug)]
pub struct NativeFn {
    /// The Java method name (the export is `Java_dev_cycles_internal_Native_<name>`).
    pub name: &'static str,
    /// Each parameter: its Rust name (snake_case) and Java type.
    pub params: &'static [(&'static str, &'static str)],
    /// The Java return type (`void` for none).
    pub ret: &'static str,
    /// The Rust source file of the `natives!` block.
    pub file: &'static str,
}

/// Every module with a `natives!` block, in the order `Native.java` lists them.
#[cfg(test)]
pub const MODULES: &[&[NativeFn]] = &[
    crate::client::NATIVES,
    crate::server::NATIVES,
    crate::timing::NATIVES,
    crate::pricing::NATIVES,
    crate::journal::NATIVES,
    crate::decode::NATIVES,
];

/// Where the generated file lives, from the repository root.
#[cfg(test)]
pub const NATIVE_JAVA: &str = "java/src/main/java/dev/cycles/internal/Native.java";

/// `snake_case` as `camelCase`.
#[cfg(test)]
fn camel(snake: &str) -> String {
    let mut out = String::new();
    let mut upper = false;
    for c in snake.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// What `Native.java` has before the natives.
#[cfg(test)]
const HEAD: &str = r#"// Generated by bindings/jvm/src/native.rs from the natives! blocks of bindings/jvm/src
// (java/scripts/gen-native.sh); do not edit. The Rust sources document each method.
package dev.cycles.internal;

/**
 * The JNI surface of libcycles_jvm (bindings/jvm). Not an API: the public classes of
 * {@code dev.cycles} wrap it. Every method throws the SDK's exceptions
 * ({@code CyclesException.fromNative}); ids are registry ids, a stale id throws the closed
 * error. Methods named {@code *Async} queue their result for {@link Completions}.
 */
public final class Native {
    static {
        NativeLoader.load();
    }

    private Native() {}

    /** Forces the library to load (no-op once loaded). */
    public static void ensureLoaded() {}
"#;

/// `Native.java`, rendered from [`MODULES`].
#[cfg(test)]
pub fn java_source() -> String {
    let mut out = String::from(HEAD);
    for module in MODULES {
        let file = module.first().map_or("", |n| n.file);
        out.push_str(&format!("\n    // {file}\n"));
        for n in module.iter() {
            let params: Vec<String> = n
                .params
                .iter()
                .map(|(name, ty)| format!("{ty} {}", camel(name)))
                .collect();
            out.push_str(&format!(
                "\n    public static native {} {}({});\n",
                n.ret,
                n.name,
                params.join(", ")
            ));
        }
    }
    out.push_str("}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use std::path::{Path, PathBuf};

    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    /// The generator's output is the committed `Native.java`; with `CYCLES_NATIVE_JAVA_OUT`
    /// set it writes the rendering there instead (java/scripts/gen-native.sh).
    #[test]
    fn native_java_is_generated() {
        let text = java_source();
        if let Some(out) = std::env::var_os("CYCLES_NATIVE_JAVA_OUT") {
            std::fs::write(&out, &text).expect("write the rendering");
            return;
        }
        let committed = std::fs::read_to_string(root().join(NATIVE_JAVA)).expect("Native.java");
        assert!(
            committed == text,
            "{NATIVE_JAVA} is stale: run java/scripts/gen-native.sh"
        );
    }

    /// Every file with a `natives!` block is in [`MODULES`] (a block left out would export
    /// symbols Native.java never declares), each name once, each a plain JNI short name.
    #[test]
    fn every_block_is_listed() {
        let src = root().join("bindings/jvm/src");
        let mut with_block = BTreeSet::new();
        for entry in std::fs::read_dir(&src).expect("bindings/jvm/src") {
            let path = entry.expect("entry").path();
            let text = std::fs::read_to_string(&path).expect("source");
            if text.lines().any(|l| l.starts_with("natives! {")) {
                with_block.insert(path.file_name().unwrap().to_string_lossy().into_owned());
            }
        }
        let listed: BTreeSet<String> = MODULES
            .iter()
            .flat_map(|m| m.iter())
            .map(|n| n.file.rsplit('/').next().unwrap().to_string())
            .collect();
        assert_eq!(with_block, listed);

        let mut names = BTreeSet::new();
        let mut count = 0;
        for n in MODULES.iter().flat_map(|m| m.iter()) {
            count += 1;
            assert!(names.insert(n.name), "{} is defined twice", n.name);
            assert!(
                n.name.chars().all(|c| c.is_ascii_alphanumeric()),
                "{}: JNI would mangle this name",
                n.name
            );
            for (p, _) in n.params {
                assert!(p.chars().all(|c| c == '_' || c.is_ascii_alphanumeric()));
            }
        }
        // Not vacuous: the surface Native.java declared before it was generated.
        assert_eq!(count, 51);
    }

    #[test]
    fn camel_case() {
        assert_eq!(camel("args_json"), "argsJson");
        assert_eq!(camel("request_timeout_json"), "requestTimeoutJson");
        assert_eq!(camel("id"), "id");
    }
}
