//! `cycles._native`: the pyo3 module behind the `cycles` Python package.
//!
//! Rules (ARCHITECTURE.md, "Rules for the bindings"; docs/bindings.md): every behaviour lives
//! in `cycles-core`, every host-neutral boundary shape in `cycles-bridge`; this crate
//! translates types, errors and async only. One tokio runtime (core's), the GIL
//! released while Python waits on it, fork detected by core's pid check, one exception
//! hierarchy (`cycles.errors`), panics caught at every exported function.

mod aio;
mod client;
mod errors;
mod fake_provider;
mod journal;
mod lifecycle;
mod pricing;
mod server;
mod timing;

use pyo3::prelude::*;

/// A deliberate panic inside a guarded native function, so tests can prove panics surface as
/// `cycles.errors.InternalError` and never as pyo3's `PanicException`.
#[pyfunction]
fn _debug_panic(sync: bool, py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    if sync {
        errors::guard(|| -> PyResult<Bound<'_, PyAny>> { panic!("deliberate test panic") })
    } else {
        errors::guard(|| {
            aio::awaitable(py, async {
                if true {
                    panic!("deliberate async test panic");
                }
                Ok(())
            })
        })
    }
}

/// The `cycles` command (bindings/cli) on `argv` (program name first), for the wheel's
/// `cycles` console script: the GIL is released while it runs, so other Python threads go on,
/// and `cycles serve` returns on SIGINT (the script restores SIGINT's default action first).
#[pyfunction]
fn cli_run(argv: Vec<String>, py: Python<'_>) -> PyResult<u8> {
    errors::guard(|| Ok(py.detach(|| cycles_cli::run(argv))))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("INTERNAL_CODE", cycles_bridge::INTERNAL_CODE)?;
    // Core's stable (name, code) table: the Python exception hierarchy is built from it.
    m.add("ERROR_CODES", cycles_bridge::error_codes())?;
    // Its (variant, kind name, code) refinements: a subclass each (ClientClosedError, ...).
    m.add("ERROR_VARIANTS", cycles_bridge::error_variants())?;
    m.add("INTERNAL_NAME", cycles_bridge::INTERNAL_NAME)?;
    m.add_class::<client::NativeClient>()?;
    m.add_class::<server::NativeLocalServer>()?;
    m.add_class::<fake_provider::NativeFakeProvider>()?;
    m.add_class::<lifecycle::NativeLifecycle>()?;
    m.add_class::<lifecycle::NativeActive>()?;
    m.add_class::<lifecycle::NativeFinished>()?;
    m.add_function(wrap_pyfunction!(_debug_panic, m)?)?;
    m.add_function(wrap_pyfunction!(cli_run, m)?)?;
    m.add_function(wrap_pyfunction!(client::decode_response, m)?)?;
    timing::register(m)?;
    pricing::register(m)?;
    journal::register(m)?;
    Ok(())
}

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
