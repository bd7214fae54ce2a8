//! napi's link setup (Node symbols resolved at load time).
fn main() {
    napi_build::setup();
}
