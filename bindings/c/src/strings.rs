//! Strings across the boundary: C strings in (NULL and non-UTF-8 are INVALID_ARGUMENT),
//! library-allocated strings out (freed with `cycles_string_free`).

use std::ffi::{c_char, CStr, CString};

use cycles_bridge::ErrorFields;

/// A required C string argument as UTF-8.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string valid for the call.
pub unsafe fn arg<'a>(p: *const c_char, name: &str) -> Result<&'a str, ErrorFields> {
    if p.is_null() {
        return Err(crate::handle::null(name));
    }
    CStr::from_ptr(p)
        .to_str()
        .map_err(|_| ErrorFields::invalid(format!("{name} is not valid UTF-8")))
}

/// An optional C string argument (NULL is `None`).
///
/// # Safety
/// As [`arg`].
pub unsafe fn opt_arg<'a>(p: *const c_char, name: &str) -> Result<Option<&'a str>, ErrorFields> {
    if p.is_null() {
        Ok(None)
    } else {
        arg(p, name).map(Some)
    }
}

/// `s` as an owned C string. A NUL inside (never in JSON text, which escapes it) is written
/// as the JSON escape `\u0000` so nothing is cut short silently.
pub fn c_string(s: &str) -> CString {
    CString::new(s.replace('\0', "\\u0000")).unwrap_or_default()
}

/// `s` handed to the caller, who frees it with `cycles_string_free`.
pub fn into_raw(s: &str) -> *mut c_char {
    c_string(s).into_raw()
}

/// Frees a string this library returned (`char **out_*` arguments). NULL is a no-op.
/// Thread safety: any thread; each string is freed once.
///
/// # Safety
/// `s` is NULL or a string returned by this library and not yet freed.
#[no_mangle]
pub unsafe extern "C" fn cycles_string_free(s: *mut c_char) {
    crate::handle::free_with(s, |s| drop(CString::from_raw(s)));
}
