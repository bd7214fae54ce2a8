//! The journal store under test. `CYCLES_TEST_JOURNAL_STORE=redis` runs the recovery
//! scenarios' tests with their journal in a Redis each test starts itself (AOF, `appendfsync
//! always`; the recovery adapter's Redis claim, docs/recovery.md); unset, empty or `file` is the
//! directory. An unknown value fails loudly rather than silently testing the default. The tests
//! look into the journal only through [`TestJournal`], so the same assertions hold for both.

use std::path::{Path, PathBuf};

use cycles_core::journal::{identity, redis_store};
use cycles_core::Config;
use cycles_test_redis::RedisServer;
use serde_json::{json, Value};

/// Whether this run's journal store is Redis.
pub fn on_redis() -> bool {
    match std::env::var("CYCLES_TEST_JOURNAL_STORE").as_deref() {
        Err(_) | Ok("") | Ok("file") => false,
        Ok("redis") => true,
        Ok(other) => panic!("CYCLES_TEST_JOURNAL_STORE={other:?}: expected file or redis"),
    }
}

/// One test's journal: a directory, or a Redis of its own (killed on drop).
pub struct TestJournal {
    dir: PathBuf,
    redis: Option<RedisServer>,
}

impl TestJournal {
    /// The journal at `dir` (a directory that need not exist yet); on Redis, a Redis whose
    /// data lives beside it, and `dir` stays unused (an engine given it must not write there).
    pub fn new(dir: impl Into<PathBuf>) -> TestJournal {
        let dir = dir.into();
        let redis = on_redis().then(|| {
            let data = dir.with_extension("redis-data");
            std::fs::create_dir_all(&data).unwrap();
            RedisServer::start(&data, true).unwrap()
        });
        TestJournal { dir, redis }
    }

    /// The directory (the file store's, or the one a Redis run leaves unused).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The `journal_url` of a Redis run. Its leases last 3 s: a SIGKILLed holder's record is
    /// taken over within a drain's time (the default, 60 s, would outlast it), and a request the
    /// server holds for a second still ends inside its lease.
    pub fn url(&self) -> Option<String> {
        self.redis
            .as_ref()
            .map(|r| format!("{}?lease_ms=3000", r.url()))
    }

    /// `cfg` journaling here.
    pub fn configure(&self, cfg: Config) -> Config {
        let cfg = cfg.with_journal_dir(&self.dir);
        match self.url() {
            Some(u) => cfg.with_journal_url(u),
            None => cfg,
        }
    }

    /// The members a child process's spec needs to journal here: `dir` and `journal_url`.
    pub fn spec(&self, mut spec: Value) -> Value {
        spec["dir"] = json!(self.dir);
        spec["journal_url"] = json!(self.url());
        spec
    }

    /// Every record of every partition: (partition, file name, bytes), sorted.
    pub fn records(&self) -> Vec<(String, String, Vec<u8>)> {
        self.entries("r")
    }

    /// Every quarantined record of every partition: (partition, name, bytes), sorted.
    pub fn quarantined(&self) -> Vec<(String, String, Vec<u8>)> {
        self.entries("q")
    }

    /// The bytes of `reservation_id`'s record in the partition of (base URL, key, tenant).
    pub fn record_of(
        &self,
        base_url: &str,
        api_key: &str,
        tenant: Option<&str>,
        reservation_id: &str,
    ) -> Option<Vec<u8>> {
        let part = partition(base_url, api_key, tenant);
        let file = cycles_core::journal::names::record_file_name(reservation_id);
        match &self.redis {
            None => std::fs::read(self.dir.join(&part).join(&file)).ok(),
            Some(r) => {
                let got: Option<Vec<u8>> =
                    redis_cmd(r, &["GET", &redis_store::record_key(&part, &file)]);
                got
            }
        }
    }

    /// Puts `bytes` as record `file` into the partition of (base URL, key, tenant), as
    /// another writer would have (a corrupt record, another SDK's).
    pub fn put(
        &self,
        base_url: &str,
        api_key: &str,
        tenant: Option<&str>,
        file: &str,
        bytes: &[u8],
    ) {
        let part = partition(base_url, api_key, tenant);
        match &self.redis {
            None => {
                let d = self.dir.join(&part);
                std::fs::create_dir_all(&d).unwrap();
                std::fs::write(d.join(file), bytes).unwrap();
            }
            Some(r) => {
                let prefix = format!("cycles:journal:{{{part}}}");
                let key = format!("{prefix}:r:{file}");
                let mut c = conn(r);
                let _: () = redis::cmd("SET")
                    .arg(&key)
                    .arg(bytes)
                    .query(&mut c)
                    .unwrap();
                let _: i64 = redis::cmd("SADD")
                    .arg(format!("{prefix}:records"))
                    .arg(file)
                    .query(&mut c)
                    .unwrap();
            }
        }
    }

    /// Whether a Redis run's engine wrote anything into the unused directory (it must not).
    pub fn dir_untouched_on_redis(&self) -> bool {
        self.redis.is_none() || !self.dir.exists()
    }

    fn entries(&self, kind: &str) -> Vec<(String, String, Vec<u8>)> {
        let mut out = Vec::new();
        match &self.redis {
            None => {
                let Ok(parts) = std::fs::read_dir(&self.dir) else {
                    return out;
                };
                for p in parts.flatten().filter(|p| p.path().is_dir()) {
                    let part = p.file_name().to_string_lossy().into_owned();
                    for f in std::fs::read_dir(p.path()).unwrap().flatten() {
                        let name = f.file_name().to_string_lossy().into_owned();
                        let quarantined = [".corrupt-", ".unsupported-", ".unrecoverable-"]
                            .iter()
                            .any(|q| name.contains(q));
                        let record = name.ends_with(".json") && !quarantined;
                        if (kind == "r" && record) || (kind == "q" && quarantined) {
                            out.push((part.clone(), name, std::fs::read(f.path()).unwrap()));
                        }
                    }
                }
            }
            Some(r) => {
                let keys: Vec<String> =
                    redis_cmd(r, &["KEYS", &format!("cycles:journal:*:{kind}:*")]);
                for k in keys {
                    let Some(rest) = k.strip_prefix("cycles:journal:{") else {
                        continue;
                    };
                    let Some((part, name)) = rest.split_once(&format!("}}:{kind}:")) else {
                        continue;
                    };
                    let bytes: Option<Vec<u8>> = redis_cmd(r, &["GET", &k]);
                    if let Some(b) = bytes {
                        out.push((part.to_string(), name.to_string(), b));
                    }
                }
            }
        }
        out.sort();
        out
    }
}

/// The partition (`fp16`) of (base URL as configured, key, tenant).
pub fn partition(base_url: &str, api_key: &str, tenant: Option<&str>) -> String {
    let base = Config::new(base_url, api_key).base_url;
    identity::partition(&base, api_key, tenant)
}

fn conn(r: &RedisServer) -> redis::Connection {
    redis::Client::open(r.url())
        .unwrap()
        .get_connection()
        .unwrap()
}

fn redis_cmd<T: redis::FromRedisValue>(r: &RedisServer, args: &[&str]) -> T {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(&mut conn(r)).unwrap()
}
