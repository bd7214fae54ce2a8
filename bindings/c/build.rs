//! Sets the shared library's SONAME (`libcycles.so.0`: the C ABI's major version), so programs
//! linked against the installed `libcycles.so` symlink load the ABI they were built for.

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libcycles.so.0");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
