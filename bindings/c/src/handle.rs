//! Pointers from C, checked in one place (after rustls-ffi's `Castable` and its
//! `try_ref_from_ptr!` / `free_box` helpers). Every NULL check of the library is one of
//! these; the exports never test a pointer by hand.
//!
//! - Handles (`*const cycles_client`, ...): [`try_ref`] in a fallible export, INVALID_ARGUMENT
//!   `<name> is NULL` (the name is the type's [`Castable::NAME`]); [`with_ref`] /
//!   [`with_ref_out`] in an accessor, whose NULL (or panic) is its default (NULL, 0, false).
//! - Out-arguments: [`try_out`] when the result is required (`<name> is NULL`; `*out` is set
//!   to NULL first, so a failure leaves no stale pointer), [`clear_opt`] / [`set_opt`] /
//!   [`try_set_opt`] when NULL means "not wanted".
//! - Buffers (`data`, `len`): [`bytes`]; callbacks: [`try_callback`].
//! - Frees: [`free_box`] / [`free_with`] (NULL is a no-op; a panic in the destructor is
//!   swallowed by the panic boundary's `abort_free`).
//!
//! C strings are [`crate::strings::arg`] / `opt_arg` (NULL and UTF-8 checked together).

use cycles_bridge::ErrorFields;

use crate::client::cycles_client;
use crate::error::cycles_error;
use crate::guard::{cycles_guard, cycles_reserve};
use crate::panic::{abort_free, or_default};
use crate::server::cycles_local_server;
use crate::timing::{cycles_fallback_planner, cycles_primary_planner};

/// A type C holds by pointer.
pub trait Castable {
    /// How errors name a NULL pointer of this type (`"client"`: `client is NULL`).
    const NAME: &'static str;
}

impl Castable for cycles_client {
    const NAME: &'static str = "client";
}

impl Castable for cycles_guard {
    const NAME: &'static str = "guard";
}

impl Castable for cycles_reserve {
    const NAME: &'static str = "reserve";
}

impl Castable for cycles_local_server {
    const NAME: &'static str = "server";
}

impl Castable for cycles_primary_planner {
    const NAME: &'static str = "planner";
}

impl Castable for cycles_fallback_planner {
    const NAME: &'static str = "planner";
}

impl Castable for cycles_error {
    const NAME: &'static str = "error";
}

/// INVALID_ARGUMENT `<name> is NULL`.
pub fn null(name: &str) -> ErrorFields {
    ErrorFields::invalid(format!("{name} is NULL"))
}

/// The handle `p` points to, or INVALID_ARGUMENT `<T::NAME> is NULL`.
///
/// # Safety
/// `p` is NULL or points to a live `T` for `'a`.
pub unsafe fn try_ref<'a, T: Castable>(p: *const T) -> Result<&'a T, ErrorFields> {
    p.as_ref().ok_or_else(|| null(T::NAME))
}

/// An accessor: `f` of the handle inside the panic boundary; NULL or a panic gives
/// `R::default()`.
///
/// # Safety
/// As [`try_ref`].
pub unsafe fn with_ref<T: Castable, R: Default>(p: *const T, f: impl FnOnce(&T) -> R) -> R {
    match p.as_ref() {
        Some(v) => or_default(|| f(v)),
        None => R::default(),
    }
}

/// An accessor that writes its answer to `*out`: `f` of the handle and the out-argument
/// inside the panic boundary; a NULL handle, a NULL `out` or a panic gives `R::default()`
/// (and nothing written).
///
/// # Safety
/// As [`try_ref`]; `out` is NULL or valid for a write.
pub unsafe fn with_ref_out<T: Castable, O, R: Default>(
    p: *const T,
    out: *mut O,
    f: impl FnOnce(&T, &mut O) -> R,
) -> R {
    match (p.as_ref(), out.as_mut()) {
        (Some(v), Some(o)) => or_default(|| f(v, o)),
        _ => R::default(),
    }
}

/// A required out-argument, set to NULL: INVALID_ARGUMENT `<name> is NULL` when `out` is.
///
/// # Safety
/// `out` is NULL or valid for a write for `'a`.
pub unsafe fn try_out<'a, T>(out: *mut *mut T, name: &str) -> Result<&'a mut *mut T, ErrorFields> {
    let out = out.as_mut().ok_or_else(|| null(name))?;
    *out = std::ptr::null_mut();
    Ok(out)
}

/// An optional out-argument (NULL: not wanted) set to NULL.
///
/// # Safety
/// `out` is NULL or valid for a write.
pub unsafe fn clear_opt<T>(out: *mut *mut T) {
    if let Some(o) = out.as_mut() {
        *o = std::ptr::null_mut();
    }
}

/// Writes `value()` to an optional out-argument (NULL: not wanted, `value` not called).
///
/// # Safety
/// `out` is NULL or valid for a write.
pub unsafe fn set_opt<T>(out: *mut T, value: impl FnOnce() -> T) {
    if let Some(o) = out.as_mut() {
        *o = value();
    }
}

/// Writes the fallible `value()` to an optional out-argument (NULL: not wanted, `value` not
/// called); its error is returned, nothing written.
///
/// # Safety
/// `out` is NULL or valid for a write.
pub unsafe fn try_set_opt<T>(
    out: *mut T,
    value: impl FnOnce() -> Result<T, ErrorFields>,
) -> Result<(), ErrorFields> {
    if let Some(o) = out.as_mut() {
        *o = value()?;
    }
    Ok(())
}

/// `len` bytes at `p` (`p` may be NULL when `len` is 0): INVALID_ARGUMENT `<name> is NULL`.
///
/// # Safety
/// `p` is NULL or valid for `len` bytes for `'a`.
pub unsafe fn bytes<'a>(p: *const u8, len: usize, name: &str) -> Result<&'a [u8], ErrorFields> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(null(name));
    }
    Ok(std::slice::from_raw_parts(p, len))
}

/// A callback argument: INVALID_ARGUMENT `<name> is NULL` when it is none.
pub fn try_callback<F>(cb: Option<F>, name: &str) -> Result<F, ErrorFields> {
    cb.ok_or_else(|| null(name))
}

/// Frees what `p` owns with `free` (NULL: a no-op), inside the panic boundary of frees.
///
/// # Safety
/// `p` is NULL or what `free` may take ownership of, not yet freed.
pub unsafe fn free_with<T>(p: *mut T, free: impl FnOnce(*mut T)) {
    if !p.is_null() {
        abort_free(|| free(p));
    }
}

/// Frees a handle this library boxed (NULL: a no-op).
///
/// # Safety
/// `p` is NULL or a pointer from `Box::into_raw`, not yet freed.
pub unsafe fn free_box<T>(p: *mut T) {
    free_with(p, |p| drop(Box::from_raw(p)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ptr;

    #[test]
    fn null_handles_are_invalid_arguments_named_by_type() {
        let e = unsafe { try_ref::<cycles_client>(ptr::null()) }
            .err()
            .unwrap();
        assert_eq!(
            (e.name.as_str(), e.message.as_str()),
            ("INVALID_ARGUMENT", "client is NULL")
        );
        let e = unsafe { try_ref::<cycles_fallback_planner>(ptr::null()) }
            .err()
            .unwrap();
        assert_eq!(e.message, "planner is NULL");
        let e = unsafe { try_out::<u8>(ptr::null_mut(), "out_json") }.unwrap_err();
        assert_eq!(e.message, "out_json is NULL");
        let e = unsafe { bytes(ptr::null(), 1, "data") }.unwrap_err();
        assert_eq!(e.message, "data is NULL");
        assert!(unsafe { bytes(ptr::null(), 0, "data") }.unwrap().is_empty());
        let e = try_callback::<fn()>(None, "cb").unwrap_err();
        assert_eq!(e.message, "cb is NULL");
    }

    #[test]
    fn outs_are_cleared_and_optional_ones_skipped() {
        let mut slot: *mut u8 = ptr::NonNull::dangling().as_ptr();
        let out = unsafe { try_out(&mut slot, "out") }.unwrap();
        assert!(out.is_null());
        let mut v = 0u8;
        let mut called = false;
        unsafe {
            set_opt(ptr::null_mut::<u8>(), || {
                called = true;
                1
            })
        };
        assert!(!called);
        unsafe { set_opt(&mut v, || 2) };
        assert_eq!(v, 2);
    }

    #[test]
    fn accessors_default_on_null_and_panic() {
        let r: u32 = unsafe { with_ref::<cycles_error, _>(ptr::null(), |_| 7) };
        assert_eq!(r, 0);
        let mut out = 0i64;
        let r =
            unsafe { with_ref_out::<cycles_error, _, bool>(ptr::null(), &mut out, |_, _| true) };
        assert!(!r);
    }
}
