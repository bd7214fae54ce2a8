//! Futures on core's runtime settling JavaScript promises (napi's own tokio runtime is not
//! used: one runtime per process, core's).
//!
//! Settlements travel back to the JS thread on the environment's one threadsafe function
//! ([`settle_channel`](crate::settle_channel)). A pending promise keeps Node alive, so one
//! dropped unsettled would leave Node waiting for ever: [`Settle`] rejects on drop, so a task
//! that is aborted, panics past the join, or is dropped by a runtime shutdown still settles its
//! promise.

use std::future::Future;
use std::marker::PhantomData;

use cycles_bridge::{task, ErrorFields};
use cycles_core::runtime;
use napi::bindgen_prelude::{Object, ToNapiValue};
use napi::Env;

use crate::errors::{core, to_js};
use crate::settle_channel::{self, Pending};

/// Message of a promise whose native task was dropped before it settled.
pub const DROPPED: &str = "the native task ended without settling its promise (cancelled by a runtime shutdown, or a bug)";

/// A deferred that is settled exactly once: explicitly, or rejected when dropped.
pub struct Settle<T: ToNapiValue + 'static>(Option<Pending>, PhantomData<fn(T)>);

impl<T: ToNapiValue + Send + 'static> Settle<T> {
    /// Resolves with `value`.
    pub fn resolve(mut self, value: T) {
        if let Some(d) = self.0.take() {
            d.resolve(value);
        }
    }

    /// Rejects with the error of `fields`.
    pub fn reject(mut self, fields: ErrorFields) {
        if let Some(d) = self.0.take() {
            d.reject(to_js(fields));
        }
    }
}

impl<T: ToNapiValue + 'static> Drop for Settle<T> {
    fn drop(&mut self) {
        if let Some(d) = self.0.take() {
            d.reject(to_js(ErrorFields::internal(DROPPED)));
        }
    }
}

/// A promise and its [`Settle`] (the runtime is checked first, so a failure throws
/// synchronously and leaves no orphan promise to reject unobserved).
pub fn deferred<T: ToNapiValue + Send + 'static>(
    env: &Env,
) -> napi::Result<(Settle<T>, Object<'_>, tokio::runtime::Handle)> {
    let rt = runtime::handle().map_err(core)?;
    let (pending, promise) = settle_channel::create(env)?;
    Ok((Settle(Some(pending), PhantomData), promise, rt))
}

/// Runs `work` as one task on core's runtime (a panic in it becomes INTERNAL, work dropped by
/// a runtime shutdown RUNTIME) and settles the returned promise with `to_value` of its value
/// or with its error.
pub fn spawn<'e, V, T, F>(
    env: &'e Env,
    work: F,
    to_value: impl FnOnce(V) -> T + Send + 'static,
) -> napi::Result<Object<'e>>
where
    V: Send + 'static,
    T: ToNapiValue + Send + 'static,
    F: Future<Output = Result<V, ErrorFields>> + Send + 'static,
{
    let (settle, promise, _) = deferred::<T>(env)?;
    // One task (`spawn_then`), not a task awaiting another. It errs only if the runtime
    // became unusable since `deferred` checked it; the dropped `settle` then rejects the
    // promise the caller still receives, so nothing is left pending or unobserved.
    let _ = task::spawn_then(work, move |r| match r {
        Ok(v) => settle.resolve(to_value(v)),
        Err(f) => settle.reject(f),
    });
    Ok(promise)
}
