//! The Redis store of the journal (`journal_url = "redis://..."`, docs/journal.md, "Stores"):
//! the same records, byte for byte, under the same partition (`fp16`) and record names
//! (`v2-<sha256>.json`) as the file store, for fleets whose workers do not outlive their disks.
//!
//! Keys, all of one partition under one hash tag (one slot of a cluster):
//! - `cycles:journal:{<fp16>}:r:<file>`: a record's bytes;
//! - `cycles:journal:{<fp16>}:records`: the set of record files;
//! - `cycles:journal:{<fp16>}:q:<name>`: a quarantined record's bytes, `name` the file
//!   store's quarantine name; `cycles:journal:{<fp16>}:quarantined`: the set of those names;
//! - `cycles:journal:{<fp16>}:l:<file>`: a record's lease, holding its fencing token, with an
//!   expiry; `cycles:journal:{<fp16>}:fence`: the counter the tokens come from.
//!
//! Every change made under a lease is one Lua script that first checks that the lease still
//! holds this holder's token, so a worker whose lease expired (paused, partitioned) can never
//! overwrite or remove a record another worker now holds; each such change also renews the
//! lease. Blocking, like the file store: the settlement engine calls it on the blocking pool.

use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::names::{self, QuarantineKind};

/// How long a lease lasts unless renewed (the URL's `lease_ms` sets another): longer than one
/// settlement attempt (the request timeout; the lease is renewed before every retry), short
/// enough that a crashed worker's records are taken over by another replica soon after.
pub const LEASE: Duration = Duration::from_millis(LEASE_MS);

/// [`LEASE`] in the milliseconds `SET ... PX` and `PEXPIRE` take.
const LEASE_MS: u64 = 60_000;

/// The shortest `lease_ms` accepted: below it a lease would lapse between a worker's own
/// round trips to Redis.
const MIN_LEASE_MS: u64 = 100;

/// How long one Redis command may take (connect, read, write) before it is an I/O failure.
const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// Connections kept for reuse (more may be open while many settlements run at once).
const POOL: usize = 16;

/// What a write must reach before the journal counts it durable (the URL's `durability`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// The server appends every write to its AOF and fsyncs it before answering
    /// (`appendonly yes`, `appendfsync always`): checked when the store is opened. Survives
    /// the Redis process or machine restarting. The default.
    Aof,
    /// `WAIT n`: the write reached `n` replicas within `timeout_ms`, checked after every
    /// write. Survives the loss of the primary while a replica that acknowledged lives.
    Replicas {
        /// Replicas that must acknowledge.
        n: u32,
        /// How long to wait for them.
        timeout_ms: u64,
    },
    /// Nothing is checked (explicit opt-out): a write acknowledged by Redis may be lost
    /// with its memory.
    None,
}

/// Where and how: the parsed `journal_url`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedisTarget {
    /// The URL handed to the Redis client (this module's own parameters removed).
    pub url: String,
    /// The URL as shown in messages and events (any password replaced).
    pub shown: String,
    /// The durability required of every write.
    pub durability: Durability,
    /// How long a lease lasts unless renewed, in milliseconds ([`LEASE`] unless the URL's
    /// `lease_ms` says otherwise). A worker that dies holding one delays the takeover of
    /// that record by at most this; one shorter than a settlement attempt lets a second worker
    /// send the same settlement meanwhile (harmless: same idempotency key).
    pub lease_ms: u64,
}

/// The prefix of every key of `partition`: one hash tag, so one slot of a cluster.
fn prefix(partition: &str) -> String {
    format!("cycles:journal:{{{partition}}}")
}

/// The key holding record `file` of `partition` (as operator tools show it).
pub fn record_key(partition: &str, file: &str) -> String {
    format!("{}:r:{file}", prefix(partition))
}

fn bad(url: &str, why: impl std::fmt::Display) -> String {
    format!("journal_url {url:?}: {why}")
}

impl RedisTarget {
    /// Parses `redis://[user:password@]host[:port][/db][?durability=aof|none|replicas:N][&wait_timeout_ms=T][&lease_ms=L]`
    /// (`rediss://` for TLS is refused: this build has no TLS for Redis). The error names
    /// what is wrong.
    pub fn parse(raw: &str) -> Result<RedisTarget, String> {
        let mut u = url::Url::parse(raw).map_err(|e| bad(raw, e))?;
        match u.scheme() {
            "redis" => {}
            "rediss" => return Err(bad(raw, "TLS (rediss://) is not supported by this build")),
            other => return Err(bad(raw, format!("unknown scheme {other:?} (redis://)"))),
        }
        if u.host_str().map_or(true, str::is_empty) {
            return Err(bad(raw, "no host"));
        }
        let mut durability = None;
        let mut wait_timeout_ms = 1000;
        let mut lease_ms = LEASE_MS;
        let mut kept = Vec::new();
        for (k, v) in u.query_pairs() {
            match k.as_ref() {
                "durability" => durability = Some(v.into_owned()),
                "wait_timeout_ms" => {
                    wait_timeout_ms =
                        v.parse::<u64>().ok().filter(|t| *t > 0).ok_or_else(|| {
                            bad(raw, "wait_timeout_ms must be a positive integer")
                        })?;
                }
                "lease_ms" => {
                    lease_ms = v
                        .parse::<u64>()
                        .ok()
                        .filter(|l| *l >= MIN_LEASE_MS)
                        .ok_or_else(|| {
                            bad(
                                raw,
                                format!("lease_ms must be an integer >= {MIN_LEASE_MS}"),
                            )
                        })?;
                }
                // The Redis client's own parameters pass through to it.
                "protocol" | "db" | "user" | "pass" => kept.push((k.into_owned(), v.into_owned())),
                other => {
                    return Err(bad(
                        raw,
                        format!(
                            "unknown parameter {other:?} (durability, wait_timeout_ms, lease_ms; \
                             protocol, db, user, pass for the Redis client)"
                        ),
                    ))
                }
            }
        }
        let durability = match durability.as_deref() {
            None | Some("aof") => Durability::Aof,
            Some("none") => Durability::None,
            Some(d) => match d.strip_prefix("replicas:").map(str::parse::<u32>) {
                Some(Ok(n)) if n > 0 => Durability::Replicas {
                    n,
                    timeout_ms: wait_timeout_ms,
                },
                _ => {
                    return Err(bad(
                        raw,
                        format!("durability {d:?}: aof, replicas:N (N >= 1) or none"),
                    ))
                }
            },
        };
        if kept.is_empty() {
            u.set_query(None);
        } else {
            u.query_pairs_mut().clear().extend_pairs(kept);
        }
        let mut shown = u.clone();
        if shown.password().is_some() {
            let _ = shown.set_password(Some("***"));
        }
        Ok(RedisTarget {
            url: u.to_string(),
            shown: shown.to_string(),
            durability,
            lease_ms,
        })
    }
}

fn io_err(e: redis::RedisError) -> io::Error {
    let kind = if e.is_timeout() {
        io::ErrorKind::TimedOut
    } else if e.is_connection_refusal() {
        io::ErrorKind::ConnectionRefused
    } else if e.is_io_error() || e.is_connection_dropped() {
        io::ErrorKind::BrokenPipe
    } else {
        io::ErrorKind::Other
    };
    io::Error::new(kind, format!("redis: {e}"))
}

/// A write refused because the lease is no longer this holder's.
fn lease_lost(file: &str) -> io::Error {
    io::Error::other(format!(
        "redis: the lease on {file} expired and was taken by another worker; nothing was changed"
    ))
}

// Every script: KEYS[1] the lease, ARGV[1] the holder's token, then the change's own keys and
// arguments (SAVE: ARGV[2] the lease ms it renews to). Each returns 0 when the lease is not
// ours (nothing changed).
const SAVE: &str = r"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('SET', KEYS[2], ARGV[3])
redis.call('SADD', KEYS[3], ARGV[4])
return 1";

const REMOVE: &str = r"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local n = redis.call('DEL', KEYS[2])
redis.call('SREM', KEYS[3], ARGV[2])
return 1 + n";

// KEYS[4] the quarantine key, ARGV[3] its name. Refuses (-1) a name already taken, so
// evidence is never overwritten; -2 when there is no record to move.
const QUARANTINE: &str = r"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if redis.call('EXISTS', KEYS[4]) == 1 then return -1 end
local bytes = redis.call('GET', KEYS[2])
if not bytes then return -2 end
redis.call('SET', KEYS[4], bytes)
redis.call('DEL', KEYS[2])
redis.call('SREM', KEYS[3], ARGV[2])
redis.call('SADD', KEYS[5], ARGV[3])
return 1";

// KEYS[1] the lease, KEYS[2] the fencing counter, ARGV[1] the lease ms: a new token when the
// lease was free (now ours), else false.
const TAKE: &str = r"
local token = redis.call('INCR', KEYS[2])
if redis.call('SET', KEYS[1], token, 'NX', 'PX', ARGV[1]) then return token end
return false";

// Renews a lease that is still ours to ARGV[2] ms; 0 when it is not.
const RENEW: &str = r"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('PEXPIRE', KEYS[1], ARGV[2])";

// Releases a lease that is still ours.
const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0";

/// One partition of a Redis journal. Cheap to clone (shared connections).
#[derive(Clone)]
pub struct RedisStore {
    inner: Arc<Inner>,
}

struct Inner {
    client: redis::Client,
    target: RedisTarget,
    prefix: String,
    pool: Mutex<Vec<redis::Connection>>,
    save: redis::Script,
    remove: redis::Script,
    quarantine: redis::Script,
    take: redis::Script,
    renew: redis::Script,
    release: redis::Script,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("url", &self.inner.target.shown)
            .field("prefix", &self.inner.prefix)
            .finish_non_exhaustive()
    }
}

/// A record's lease in Redis, released (if still ours) when dropped.
pub struct Lease {
    store: RedisStore,
    file: String,
    token: String,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("file", &self.file)
            .field("fence", &self.token)
            .finish()
    }
}

impl Lease {
    /// The fencing token: increases with every lease taken in the partition, so a later
    /// holder's token is always greater than an earlier one's.
    pub fn fence(&self) -> u64 {
        self.token.parse().unwrap_or(0)
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        // Best effort: a lease not released expires by itself (LEASE).
        let key = self.store.key("l", &self.file);
        let _ = self.store.with(|c| {
            self.store
                .inner
                .release
                .key(&key)
                .arg(&self.token)
                .invoke::<i64>(c)
        });
    }
}

impl RedisStore {
    /// Opens the store of `partition` at `target` and checks, once, that the server makes
    /// writes as durable as `target.durability` asks (`Aof`: `appendonly yes` and
    /// `appendfsync always`; `Replicas`: that many connected replicas). The error says what
    /// is missing and how to opt out.
    pub fn open(target: &RedisTarget, partition: &str) -> Result<RedisStore, String> {
        let client = redis::Client::open(target.url.as_str())
            .map_err(|e| format!("journal_url {}: {e}", target.shown))?;
        let store = RedisStore {
            inner: Arc::new(Inner {
                client,
                target: target.clone(),
                prefix: prefix(partition),
                pool: Mutex::new(Vec::new()),
                save: redis::Script::new(SAVE),
                remove: redis::Script::new(REMOVE),
                quarantine: redis::Script::new(QUARANTINE),
                take: redis::Script::new(TAKE),
                renew: redis::Script::new(RENEW),
                release: redis::Script::new(RELEASE),
            }),
        };
        store
            .check_durability()
            .map_err(|e| format!("the journal's Redis at {}: {e}", target.shown))?;
        Ok(store)
    }

    fn check_durability(&self) -> Result<(), String> {
        let config = |name: &str| -> Result<String, String> {
            let pair: Vec<String> = self
                .with(|c| redis::cmd("CONFIG").arg("GET").arg(name).query(c))
                .map_err(|e| {
                    format!(
                        "cannot read its {name} setting ({e}); if CONFIG is disabled there, \
                         add ?durability=replicas:N or ?durability=none to the URL"
                    )
                })?;
            Ok(pair.get(1).cloned().unwrap_or_default())
        };
        match self.inner.target.durability {
            Durability::None => self
                .with(|c| redis::cmd("PING").query::<String>(c))
                .map(|_| ())
                .map_err(|e| e.to_string()),
            Durability::Aof => {
                let (aof, fsync) = (config("appendonly")?, config("appendfsync")?);
                if aof == "yes" && fsync == "always" {
                    return Ok(());
                }
                Err(format!(
                    "it does not make a write durable before answering (appendonly {aof}, \
                     appendfsync {fsync}): set appendonly yes and appendfsync always, or add \
                     ?durability=replicas:N (WAIT for N replicas) or ?durability=none (accept \
                     losing what Redis had not written) to the URL"
                ))
            }
            Durability::Replicas { n, .. } => {
                let info: String = self
                    .with(|c| redis::cmd("INFO").arg("replication").query(c))
                    .map_err(|e| e.to_string())?;
                let connected = info
                    .lines()
                    .find_map(|l| l.strip_prefix("connected_slaves:"))
                    .and_then(|v| v.trim().parse::<u32>().ok())
                    .unwrap_or(0);
                if connected >= n {
                    return Ok(());
                }
                Err(format!(
                    "durability=replicas:{n} but it has {connected} connected replica(s)"
                ))
            }
        }
    }

    /// The partitions that have records or quarantined records at `target` (a `SCAN` of
    /// their two sets; Redis deletes a set when it empties).
    pub fn partitions(target: &RedisTarget) -> io::Result<Vec<String>> {
        let client = redis::Client::open(target.url.as_str()).map_err(io_err)?;
        let mut c = client
            .get_connection_with_timeout(IO_TIMEOUT)
            .map_err(io_err)?;
        c.set_read_timeout(Some(IO_TIMEOUT)).map_err(io_err)?;
        let mut out = Vec::new();
        for set in ["records", "quarantined"] {
            let suffix = format!("}}:{set}");
            let mut cursor: u64 = 0;
            loop {
                let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("MATCH")
                    .arg(format!("cycles:journal:{{*}}:{set}"))
                    .arg("COUNT")
                    .arg(1000)
                    .query(&mut c)
                    .map_err(io_err)?;
                out.extend(keys.iter().filter_map(|k| {
                    let inner = k.strip_prefix("cycles:journal:{")?.strip_suffix(&suffix)?;
                    Some(inner.to_string())
                }));
                if next == 0 {
                    break;
                }
                cursor = next;
            }
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// The URL as shown in messages (no password).
    pub fn shown(&self) -> &str {
        &self.inner.target.shown
    }

    /// Where a record (or quarantined name) lives, for messages and events.
    pub fn locate(&self, file: &str) -> String {
        format!("{} {}", self.inner.target.shown, self.key("r", file))
    }

    fn key(&self, kind: &str, file: &str) -> String {
        format!("{}:{kind}:{file}", self.inner.prefix)
    }

    fn set_key(&self, name: &str) -> String {
        format!("{}:{name}", self.inner.prefix)
    }

    fn connect(&self) -> io::Result<redis::Connection> {
        let c = self
            .inner
            .client
            .get_connection_with_timeout(IO_TIMEOUT)
            .map_err(io_err)?;
        c.set_read_timeout(Some(IO_TIMEOUT)).map_err(io_err)?;
        c.set_write_timeout(Some(IO_TIMEOUT)).map_err(io_err)?;
        Ok(c)
    }

    /// Runs `f` on a pooled connection (opened on demand); a failed connection is dropped.
    /// A pooled connection that Redis closed while it sat idle (Redis restarted, or its
    /// `timeout` passed) fails its first command as dropped: then the whole pool is let go
    /// (its other connections are as stale) and `f` runs once more on a fresh connection.
    /// Sending again is safe for every command here: reads, and scripts that repeat
    /// harmlessly (a save or removal under the same lease, a release), or that refuse the
    /// second time (a lease already taken, a record already quarantined: an error, never a
    /// second change). A timeout is never retried: the command may be running.
    fn with<T>(
        &self,
        mut f: impl FnMut(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> io::Result<T> {
        let pooled = self
            .inner
            .pool
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop();
        let reused = pooled.is_some();
        let mut conn = match pooled {
            Some(c) => c,
            None => self.connect()?,
        };
        let mut out = f(&mut conn);
        if reused && matches!(&out, Err(e) if e.is_connection_dropped()) {
            self.inner
                .pool
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clear();
            conn = self.connect()?;
            out = f(&mut conn);
        }
        match &out {
            Err(e) if e.is_io_error() || e.is_connection_dropped() || e.is_timeout() => {}
            _ => {
                let mut pool = self.inner.pool.lock().unwrap_or_else(|p| p.into_inner());
                if pool.len() < POOL {
                    pool.push(conn);
                }
            }
        }
        out.map_err(io_err)
    }

    /// After a write: the replicas `Durability::Replicas` asks for acknowledged it.
    fn settle_durability(&self) -> io::Result<()> {
        let Durability::Replicas { n, timeout_ms } = self.inner.target.durability else {
            return Ok(());
        };
        let acked: u32 = self.with(|c| redis::cmd("WAIT").arg(n).arg(timeout_ms).query(c))?;
        if acked < n {
            return Err(io::Error::other(format!(
                "redis: the write reached {acked} of {n} replicas within {timeout_ms} ms"
            )));
        }
        Ok(())
    }

    /// Takes the lease of `file` (one round trip); `Ok(None)` when another worker holds it.
    pub fn try_lease(&self, file: &str) -> io::Result<Option<Lease>> {
        let token: Option<u64> = self.with(|c| {
            self.inner
                .take
                .key(self.key("l", file))
                .key(self.set_key("fence"))
                .arg(self.inner.target.lease_ms)
                .invoke(c)
        })?;
        Ok(token.map(|t| Lease {
            store: self.clone(),
            file: file.to_string(),
            token: t.to_string(),
        }))
    }

    /// Renews `lease` for another `lease_ms`; false when it was no longer ours.
    pub fn renew(&self, lease: &Lease) -> io::Result<bool> {
        let token = self.owned(lease, &lease.file)?;
        let done: i64 = self.with(|c| {
            self.inner
                .renew
                .key(self.key("l", &lease.file))
                .arg(token)
                .arg(self.inner.target.lease_ms)
                .invoke(c)
        })?;
        Ok(done == 1)
    }

    fn owned<'a>(&self, lease: &'a Lease, file: &str) -> io::Result<&'a str> {
        if lease.file != file || !Arc::ptr_eq(&lease.store.inner, &self.inner) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the lease held is not this record's",
            ));
        }
        Ok(&lease.token)
    }

    /// Writes `bytes` as `file` under `lease` (renewing it), then waits for the durability
    /// asked for.
    pub fn save(&self, lease: &Lease, file: &str, bytes: &[u8]) -> io::Result<()> {
        let token = self.owned(lease, file)?;
        let done: i64 = self.with(|c| {
            self.inner
                .save
                .key(self.key("l", file))
                .key(self.key("r", file))
                .key(self.set_key("records"))
                .arg(token)
                .arg(self.inner.target.lease_ms)
                .arg(bytes)
                .arg(file)
                .invoke(c)
        })?;
        if done == 0 {
            return Err(lease_lost(file));
        }
        self.settle_durability()
    }

    /// The bytes of `file`, if any.
    pub fn load(&self, lease: &Lease, file: &str) -> io::Result<Option<Vec<u8>>> {
        self.owned(lease, file)?;
        self.with(|c| redis::cmd("GET").arg(self.key("r", file)).query(c))
    }

    /// Removes `file` under `lease`; true when it existed. Not waited on for replicas: a
    /// record that reappears replays idempotently (as the file store's removal).
    pub fn remove(&self, lease: &Lease, file: &str) -> io::Result<bool> {
        let token = self.owned(lease, file)?;
        let done: i64 = self.with(|c| {
            self.inner
                .remove
                .key(self.key("l", file))
                .key(self.key("r", file))
                .key(self.set_key("records"))
                .arg(token)
                .arg(file)
                .invoke(c)
        })?;
        match done {
            0 => Err(lease_lost(file)),
            n => Ok(n > 1),
        }
    }

    /// Moves `file` to a quarantine name (never overwriting one); the name.
    pub fn quarantine(
        &self,
        lease: &Lease,
        file: &str,
        kind: QuarantineKind,
    ) -> io::Result<String> {
        let token = self.owned(lease, file)?;
        let now = super::fsio::now_ms();
        for n in 0..10_000u32 {
            let name = names::quarantine_file_name(file, kind, now, n);
            let done: i64 = self.with(|c| {
                self.inner
                    .quarantine
                    .key(self.key("l", file))
                    .key(self.key("r", file))
                    .key(self.set_key("records"))
                    .key(self.key("q", &name))
                    .key(self.set_key("quarantined"))
                    .arg(token)
                    .arg(file)
                    .arg(&name)
                    .invoke(c)
            })?;
            match done {
                1 => {
                    self.settle_durability()?;
                    return Ok(name);
                }
                -1 => continue,
                -2 => {
                    return Err(io::Error::new(
                        io::ErrorKind::NotFound,
                        format!("redis: no record {file} to quarantine"),
                    ))
                }
                _ => return Err(lease_lost(file)),
            }
        }
        Err(io::Error::other("no free quarantine name"))
    }

    /// Every record file and its bytes (a file removed meanwhile is left out), sorted.
    pub fn records(&self) -> io::Result<Vec<(String, Vec<u8>)>> {
        let mut files: Vec<String> =
            self.with(|c| redis::cmd("SMEMBERS").arg(self.set_key("records")).query(c))?;
        files.sort();
        self.values("r", files)
    }

    /// Every quarantined name and its bytes, sorted.
    pub fn quarantined(&self) -> io::Result<Vec<(String, Vec<u8>)>> {
        let mut names: Vec<String> = self.with(|c| {
            redis::cmd("SMEMBERS")
                .arg(self.set_key("quarantined"))
                .query(c)
        })?;
        names.sort();
        self.values("q", names)
    }

    fn values(&self, kind: &str, files: Vec<String>) -> io::Result<Vec<(String, Vec<u8>)>> {
        if files.is_empty() {
            return Ok(Vec::new());
        }
        let mut out = Vec::with_capacity(files.len());
        for chunk in files.chunks(256) {
            let keys: Vec<String> = chunk.iter().map(|f| self.key(kind, f)).collect();
            let values: Vec<Option<Vec<u8>>> =
                self.with(|c| redis::cmd("MGET").arg(&keys).query(c))?;
            for (f, v) in chunk.iter().zip(values) {
                if let Some(v) = v {
                    out.push((f.clone(), v));
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_url_is_aof_with_the_default_lease() {
        let t = RedisTarget::parse("redis://127.0.0.1:6379/2").unwrap();
        assert_eq!(t.durability, Durability::Aof);
        assert_eq!(t.lease_ms, LEASE_MS);
        assert_eq!(t.url, "redis://127.0.0.1:6379/2");
    }

    #[test]
    fn our_parameters_are_taken_out_and_the_password_hidden() {
        let t = RedisTarget::parse(
            "redis://u:secret@h:1/0?durability=replicas:2&wait_timeout_ms=250&lease_ms=1500&protocol=resp2",
        )
        .unwrap();
        assert_eq!(
            t.durability,
            Durability::Replicas {
                n: 2,
                timeout_ms: 250
            }
        );
        assert_eq!(t.lease_ms, 1500);
        assert_eq!(t.url, "redis://u:secret@h:1/0?protocol=resp2");
        assert!(!t.shown.contains("secret"), "{}", t.shown);
        assert_eq!(
            RedisTarget::parse("redis://h?durability=none")
                .unwrap()
                .durability,
            Durability::None
        );
    }

    #[test]
    fn bad_urls_name_what_is_wrong() {
        for (url, says) in [
            ("rediss://h", "TLS"),
            ("http://h", "unknown scheme"),
            ("redis://h?durability=replicas:0", "durability"),
            ("redis://h?durability=fsync", "durability"),
            ("redis://h?wait_timeout_ms=0", "wait_timeout_ms"),
            (
                "redis://h?lease_ms=99",
                "lease_ms must be an integer >= 100",
            ),
            ("redis://h?lease_ms=soon", "lease_ms"),
            (
                "redis://h?lease_msx=1000",
                "unknown parameter \"lease_msx\"",
            ),
            ("redis://h?durabilty=none", "unknown parameter"),
        ] {
            let e = RedisTarget::parse(url).unwrap_err();
            assert!(e.contains(says), "{url}: {e}");
        }
    }
}
