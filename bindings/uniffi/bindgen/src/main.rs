//! uniffi's bindings generator, pinned to the scaffolding's version (its own Cargo.lock):
//! `cargo run --manifest-path bindings/uniffi/bindgen/Cargo.toml -- generate ...`
//! (bindings/uniffi/scripts/generate.sh).
fn main() {
    uniffi::uniffi_bindgen_main()
}
