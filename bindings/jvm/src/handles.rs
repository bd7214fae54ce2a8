//! Native objects handed to Java as ids: a registry of `Arc`s. A closed, freed or forged id
//! finds nothing and becomes the closed error (IllegalStateException in Java), so use after
//! close can never touch freed memory. `live()` counts what Java has not freed yet (the
//! Cleaner backstop is tested with it).

use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use cycles_bridge::ErrorFields;

type Registry = Mutex<HashMap<i64, Arc<dyn Any + Send + Sync>>>;

static NEXT: AtomicI64 = AtomicI64::new(1);

fn registry() -> &'static Registry {
    static REG: OnceLock<Registry> = OnceLock::new();
    REG.get_or_init(Default::default)
}

/// Registers `v`; its id (never 0).
pub fn put<T: Any + Send + Sync>(v: T) -> i64 {
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    registry()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(id, Arc::new(v));
    id
}

/// The object of `id`, or the closed error naming `what` ("client", "guarded action", ...).
pub fn get<T: Any + Send + Sync>(id: i64, what: &str) -> Result<Arc<T>, ErrorFields> {
    let found = registry()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&id)
        .cloned();
    found
        .and_then(|a| a.downcast::<T>().ok())
        .ok_or_else(|| gone(what))
}

/// Removes `id` (idempotent): the object lives on while a call in flight holds it.
pub fn free(id: i64) {
    let removed = registry()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&id);
    drop(removed);
}

/// How many ids are registered.
pub fn live() -> usize {
    registry().lock().unwrap_or_else(|p| p.into_inner()).len()
}

/// The closed error for a `what` that is closed or was never there.
pub fn gone(what: &str) -> ErrorFields {
    let mut f = ErrorFields::closed();
    if what != "client" {
        f.message = format!("the {what} is closed");
    }
    f
}
