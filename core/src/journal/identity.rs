//! The identity partition: which sub-directory of the journal a client's records live in.
//!
//! `fp16` is the first 8 bytes (16 lowercase hex characters) of
//! PBKDF2-HMAC-SHA256(principal, salt, 30000 iterations), exactly as the official SDKs compute
//! it (`JOURNAL.md`), so every SDK of one identity finds the same records. The principal is the
//! tenant when one is configured (stable across API-key rotation), else the API key; the salt
//! binds the partition to the base URL exactly as configured.
//!
//! PBKDF2 costs ~15 ms of CPU on purpose, so the result is cached per identity for the life of
//! the process; the cache key is a SHA-256 of the inputs, so the API key itself is not kept.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use sha2::{Digest, Sha256};

/// PBKDF2 iteration count shared with the official SDKs.
pub const PBKDF2_ITERATIONS: u32 = 30_000;
/// Prefix of the salt; the base URL follows it verbatim.
pub const SALT_PREFIX: &str = "runcycles-commit-journal\n";

/// The principal string hashed into the partition: `"tenant\n" + tenant` when `tenant` is
/// configured and not blank (the raw, untrimmed value is used), else `"key\n" + api_key`.
pub fn principal(api_key: &str, tenant: Option<&str>) -> String {
    match tenant {
        Some(t) if !t.trim().is_empty() => format!("tenant\n{t}"),
        _ => format!("key\n{api_key}"),
    }
}

/// The salt for `base_url` (not normalised: `http://h` and `http://h/` differ).
pub fn salt(base_url: &str) -> String {
    format!("{SALT_PREFIX}{base_url}")
}

/// Computes `fp16` without the cache (always ~15 ms). Prefer [`partition`].
pub fn fp16_uncached(base_url: &str, api_key: &str, tenant: Option<&str>) -> String {
    let mut out = [0u8; 32];
    pbkdf2::pbkdf2_hmac::<Sha256>(
        principal(api_key, tenant).as_bytes(),
        salt(base_url).as_bytes(),
        PBKDF2_ITERATIONS,
        &mut out,
    );
    hex::encode(&out[..8])
}

/// The identity partition (`fp16`) of (base URL, API key, tenant), computed once per identity
/// per process and cached afterwards.
pub fn partition(base_url: &str, api_key: &str, tenant: Option<&str>) -> String {
    static CACHE: OnceLock<Mutex<HashMap<[u8; 32], String>>> = OnceLock::new();
    let mut h = Sha256::new();
    // Length-prefixed so no two input pairs share a cache key.
    for part in [principal(api_key, tenant), salt(base_url)] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    let key: [u8; 32] = h.finalize().into();
    cached(CACHE.get_or_init(Default::default), key, || {
        fp16_uncached(base_url, api_key, tenant)
    })
}

/// `cache`'s value for `key`, computed by `compute` the first time.
fn cached(
    cache: &Mutex<HashMap<[u8; 32], String>>,
    key: [u8; 32],
    compute: impl FnOnce() -> String,
) -> String {
    if let Some(v) = cache.lock().ok().and_then(|c| c.get(&key).cloned()) {
        return v;
    }
    // Computed outside the lock: a concurrent first use costs a duplicate computation at
    // worst, never a stalled thread behind another's 15 ms.
    let v = compute();
    if let Ok(mut c) = cache.lock() {
        c.insert(key, v.clone());
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journal_md_vectors() {
        assert_eq!(
            fp16_uncached("http://localhost", "test-key", None),
            "68c905017df7dbfc"
        );
        assert_eq!(
            fp16_uncached("http://localhost", "any-key", Some("acme")),
            "8baba538fb970da4"
        );
        // Tenant partitions ignore the key (stable across rotation); blank tenants do not count.
        assert_eq!(
            partition("http://localhost", "other-key", Some("acme")),
            "8baba538fb970da4"
        );
        assert_eq!(
            partition("http://localhost", "test-key", Some("  ")),
            "68c905017df7dbfc"
        );
        assert_ne!(
            partition("http://localhost/", "test-key", None),
            "68c905017df7dbfc"
        );
    }

    #[test]
    fn an_identity_is_computed_once_and_then_cached() {
        // Counted, not timed: a timed assertion fails on a loaded machine.
        let cache = Mutex::new(HashMap::new());
        let computed = std::cell::Cell::new(0);
        let compute = || {
            computed.set(computed.get() + 1);
            "0123456789abcdef".to_string()
        };
        assert_eq!(cached(&cache, [1; 32], compute), "0123456789abcdef");
        assert_eq!(cached(&cache, [1; 32], compute), "0123456789abcdef");
        assert_eq!(computed.get(), 1);
        cached(&cache, [2; 32], compute);
        assert_eq!(computed.get(), 2, "another identity is computed");
        assert_eq!(
            partition("http://cache-test", "k", None),
            fp16_uncached("http://cache-test", "k", None)
        );
        assert_eq!(
            partition("http://cache-test", "k", None),
            fp16_uncached("http://cache-test", "k", None)
        );
    }
}
