//! Seeded inputs for the differential: every public timing function, planner sequences,
//! journal names, identities and records, weighted toward the edges where implementations
//! drift (0, 1, 999, 1000, 2^53 ± 1, the limits of i64/u64, infinity).

// Inputs use the vectors' integer encoding (a number up to 2^53 - 1 in magnitude, else a
// decimal string), the bridge's.
use cycles_bridge::timing_json::int_out as int;
use fastrand::Rng;
use serde_json::{json, Value};

/// The timing functions of `PROTOCOL.md` (`op: timing`).
pub const TIMING_FUNCTIONS: [&str; 17] = [
    "schedule",
    "lead_floor",
    "attempt_budget",
    "safety_margin",
    "retry_reserve",
    "next_delay",
    "current_lead_estimate",
    "retry_window",
    "transient_retry_delay",
    "parse_retry_after",
    "extend_timeout",
    "min_lead_floor",
    "attempt_cutoff",
    "classify_grant",
    "cadence",
    "delay_with_skips",
    "is_permanent_stop_code",
];

const U64_EDGES: [u64; 24] = [
    0,
    1,
    2,
    3,
    4,
    999,
    1000,
    1001,
    1999,
    2000,
    9_999,
    10_000,
    59_999,
    60_000,
    (1 << 31) - 1,
    1 << 32,
    (1 << 53) - 1,
    1 << 53,
    (1 << 53) + 1,
    i64::MAX as u64 - 1,
    i64::MAX as u64,
    i64::MAX as u64 + 1,
    u64::MAX - 1,
    u64::MAX,
];

/// The generator, one per matrix run (`--seed`).
pub struct Gen(Rng);

impl Gen {
    /// A generator with `seed`.
    pub fn new(seed: u64) -> Gen {
        Gen(Rng::with_seed(seed))
    }

    fn u64v(&mut self) -> u64 {
        match self.0.u8(0..10) {
            0..=3 => U64_EDGES[self.0.usize(..U64_EDGES.len())],
            4..=6 => self.0.u64(0..200_000),
            7 => self.0.u64(0..10_000_000_000),
            8 => {
                let e = U64_EDGES[self.0.usize(..U64_EDGES.len())];
                e.wrapping_add(self.0.u64(0..3)).wrapping_sub(1)
            }
            _ => self.0.u64(..),
        }
    }

    fn u64j(&mut self) -> Value {
        let v = self.u64v();
        int(v.into())
    }

    fn i64v(&mut self) -> i64 {
        match self.0.u8(0..10) {
            0..=1 => [i64::MIN, i64::MIN + 1, -1, 0, 1, i64::MAX - 1, i64::MAX][self.0.usize(..7)],
            2..=5 => self.0.i64(-200_000..200_000),
            6..=7 => self.0.i64(0..4_000_000_000_000),
            _ => self.0.i64(..),
        }
    }

    fn millis(&mut self) -> Value {
        if self.0.u8(0..12) == 0 {
            json!("infinite")
        } else {
            self.u64j()
        }
    }

    fn opt_millis(&mut self) -> Value {
        if self.0.u8(0..6) == 0 {
            Value::Null
        } else {
            self.millis()
        }
    }

    fn signed(&mut self) -> Value {
        match self.0.u8(0..14) {
            0 => json!("infinite"),
            1 => json!("-infinite"),
            2..=4 => int(-i128::from(self.u64v())),
            _ => int(self.u64v().into()),
        }
    }

    fn wide(&mut self) -> Value {
        match self.0.u8(0..12) {
            0 => int(i128::from(u64::MAX) + 1),
            1 => int(-i128::from(u64::MAX) - 1),
            2 => int(i128::from(self.0.u64(..)) * i128::from(self.0.u8(2..=255))),
            _ => int(self.i64v().into()),
        }
    }

    fn retry_after(&mut self) -> Value {
        const RAW: [&str; 24] = [
            "",
            "0",
            "1",
            "5",
            "60",
            "120",
            "999",
            "1000",
            " 5",
            "5 ",
            "+5",
            "-1",
            "1.5",
            "1e3",
            "abc",
            "0x10",
            "\u{663}",
            "Wed, 21 Oct 2015 07:28:00 GMT",
            "007",
            "9007199254740993",
            "18446744073709551615",
            "18446744073709551616",
            "99999999999999999999999",
            "3600",
        ];
        match self.0.u8(0..8) {
            0 => Value::Null,
            1..=4 => json!(RAW[self.0.usize(..RAW.len())]),
            5 => json!(self.0.u64(..).to_string()),
            6 => json!(self.0.u32(..100_000).to_string()),
            _ => json!(self.text(6)),
        }
    }

    fn code(&mut self) -> Value {
        const CODES: [&str; 14] = [
            "RESERVATION_EXPIRED",
            "RESERVATION_FINALIZED",
            "NOT_FOUND",
            "MAX_EXTENSIONS_EXCEEDED",
            "BUDGET_EXCEEDED",
            "LIMIT_EXCEEDED",
            "INTERNAL_ERROR",
            "INVALID_REQUEST",
            "UNAUTHORIZED",
            "FORBIDDEN",
            "IDEMPOTENCY_MISMATCH",
            "reservation_expired",
            " NOT_FOUND",
            "",
        ];
        if self.0.u8(0..5) == 0 {
            json!(self.text(10))
        } else {
            json!(CODES[self.0.usize(..CODES.len())])
        }
    }

    /// A short string from a pool that includes what paths and file names find awkward.
    pub fn text(&mut self, max: usize) -> String {
        const CHARS: [char; 24] = [
            'a',
            'Z',
            '0',
            '9',
            '_',
            '-',
            '.',
            '/',
            '\\',
            ' ',
            '%',
            '#',
            '?',
            ':',
            '+',
            '~',
            'é',
            'ü',
            '\u{2603}',
            '\u{1d11e}',
            '\u{1f600}',
            '\u{0301}',
            '"',
            '\'',
        ];
        let n = self.0.usize(1..=max.max(1));
        (0..n)
            .map(|_| {
                if self.0.bool() {
                    self.0.alphanumeric()
                } else {
                    CHARS[self.0.usize(..CHARS.len())]
                }
            })
            .collect()
    }

    /// Arguments for one call of timing function `f`.
    pub fn timing_args(&mut self, f: &str) -> Value {
        match f {
            "schedule" => json!({"remaining_ttl_ms": self.u64j(), "rtt_ms": self.opt_millis(),
                                 "max_rtt_ms": self.opt_millis(), "request_timeout_ms": self.millis()}),
            "lead_floor" => json!({"remaining_ttl_ms": self.u64j(), "rtt_ms": self.opt_millis()}),
            "attempt_budget" => {
                json!({"request_timeout_ms": self.millis(), "max_rtt_ms": self.opt_millis()})
            }
            "safety_margin" => json!({"max_rtt_ms": self.opt_millis()}),
            "retry_reserve" => {
                json!({"attempt_budget_ms": self.millis(), "safety_margin_ms": self.millis()})
            }
            "next_delay" => {
                json!({"lead_floor_ms": self.millis(), "retry_reserve_ms": self.millis()})
            }
            "current_lead_estimate" => {
                json!({"last_lead_floor_ms": self.millis(), "elapsed_ms": self.millis()})
            }
            "retry_window" => json!({"current_lead_estimate_ms": self.millis(),
                                     "attempt_budget_ms": self.millis(), "safety_margin_ms": self.millis()}),
            "transient_retry_delay" => json!({"current_lead_estimate_ms": self.millis(),
                                              "retry_window_ms": self.signed()}),
            "parse_retry_after" => json!({"raw": self.retry_after()}),
            "extend_timeout" => {
                json!({"lead_floor_ms": self.millis(), "max_rtt_ms": self.opt_millis(),
                                       "configured_timeout_ms": self.millis()})
            }
            "min_lead_floor" => {
                json!({"timeout_ms": self.millis(), "max_rtt_ms": self.opt_millis()})
            }
            "attempt_cutoff" => json!({"timeout_ms": self.millis()}),
            "classify_grant" => {
                json!({"grant_ms": int(self.i64v().into()), "elapsed_ms": self.millis(),
                                       "requested_ttl_ms": self.u64j()})
            }
            "cadence" => {
                let regime =
                    ["unknown", "normal", "grant_clamped", "max_lead_clamped"][self.0.usize(..4)];
                json!({"regime": regime, "last_grant_ms": int(self.i64v().into()),
                       "requested_ttl_ms": self.u64j()})
            }
            "delay_with_skips" => json!({"lead_min_now_ms": self.wide(),
                                         "last_grant_ms": int(self.i64v().into()), "cadence_ms": self.millis()}),
            "is_permanent_stop_code" => json!({"code": self.code()}),
            other => panic!("no generator for {other}"),
        }
    }

    fn failure(&mut self) -> Value {
        match self.0.u8(0..3) {
            0 => json!({"kind": "transient"}),
            1 => json!({"kind": "rate_limited", "retry_after": self.retry_after()}),
            _ => {
                let status = [400, 401, 403, 404, 409, 410, 422, 499][self.0.usize(..8)];
                json!({"kind": "error", "status": status, "code": self.code()})
            }
        }
    }

    fn small_or_edge(&mut self) -> u64 {
        if self.0.u8(0..6) == 0 {
            self.u64v()
        } else {
            self.0.u64(0..300_000)
        }
    }

    fn steps(&mut self, success: &mut dyn FnMut(&mut Gen, u64) -> Value) -> Value {
        let mut at: u64 = if self.0.u8(0..8) == 0 {
            self.u64v() / 2
        } else {
            self.0.u64(0..1_000_000)
        };
        let n = self.0.usize(1..=8);
        let mut steps = Vec::with_capacity(n);
        for _ in 0..n {
            let step = if self.0.u8(0..5) < 3 {
                success(self, at)
            } else {
                json!({"event": "failure", "at_us": int(at.into()), "failure": self.failure()})
            };
            steps.push(step);
            at = at.saturating_add(match self.0.u8(0..6) {
                0 => 0,
                1 => self.u64v(),
                _ => self.0.u64(0..120_000_000),
            });
        }
        Value::Array(steps)
    }

    /// One `op: primary` request.
    pub fn primary(&mut self) -> Value {
        let timeout = if self.0.u8(0..3) == 0 {
            self.millis()
        } else {
            json!(self.0.u64(1..30_000))
        };
        let steps = self.steps(&mut |g, at| {
            let ttl = g.small_or_edge();
            let rtt = if g.0.u8(0..5) == 0 { Value::Null } else { json!(g.0.u64(0..5_000)) };
            json!({"event": "success", "at_us": int(at.into()), "remaining_ttl_ms": int(ttl.into()), "rtt_ms": rtt})
        });
        json!({"op": "primary", "request_timeout_ms": timeout, "derive": self.0.bool(), "steps": steps})
    }

    /// One `op: fallback` request.
    pub fn fallback(&mut self) -> Value {
        let ttl = self.small_or_edge();
        let created_at = self.0.u64(0..1_000_000);
        let base: i64 = if self.0.u8(0..8) == 0 {
            self.i64v()
        } else {
            self.0.i64(0..4_000_000_000_000)
        };
        let first_expiry = base.saturating_add(self.0.i64(-1000..300_000));
        let mut expiry = first_expiry;
        let steps = self.steps(&mut |g, at| {
            expiry = match g.0.u8(0..6) {
                0 => g.i64v(),
                1 => expiry,
                _ => expiry.saturating_add(g.0.i64(-5_000..200_000)),
            };
            json!({"event": "success", "at_us": int(at.into()), "expires_at_ms": int(expiry.into())})
        });
        json!({"op": "fallback", "requested_ttl_ms": int(ttl.into()),
               "create": {"at_us": int(created_at.into()), "expires_at_ms": int(first_expiry.into())},
               "prime": self.0.bool(), "steps": steps})
    }

    /// A reservation id for `op: journal_names`.
    pub fn reservation_id(&mut self) -> String {
        match self.0.u8(0..6) {
            0 => format!("rsv_{:032x}", self.0.u128(..)),
            1 => self.0.u128(..).to_string(),
            2 => "x".repeat(self.0.usize(100..400)),
            _ => self.text(40),
        }
    }

    /// One `op: fingerprint` request.
    pub fn identity(&mut self) -> Value {
        const URLS: [&str; 8] = [
            "http://localhost",
            "http://localhost/",
            "http://127.0.0.1:7878",
            "https://api.cycles.example/v1",
            "https://API.cycles.example:443/v1/",
            "http://[::1]:8080",
            "https://caf\u{e9}.example",
            "",
        ];
        let url = if self.0.u8(0..4) == 0 {
            format!("https://{}.example", self.text(12))
        } else {
            URLS[self.0.usize(..URLS.len())].to_string()
        };
        let tenant = if self.0.bool() {
            Value::Null
        } else {
            json!(self.text(16))
        };
        json!({"op": "fingerprint", "base_url": url, "api_key": self.text(40), "tenant": tenant})
    }

    /// A record file's text: a valid version-1 record with random content and spelling, or a
    /// damaged one.
    pub fn record_text(&mut self) -> String {
        let id = self.reservation_id();
        let key = self.text(20);
        let amount = int(self.i64v().into());
        let meta = json!({"note": self.text(8), "n": int(self.u64v().into())});
        let commit = json!({"idempotency_key": key, "actual": {"unit": "USD_MICROCENTS", "amount": amount},
                            "metadata": meta});
        let event = json!({"idempotency_key": key, "subject": {"tenant": self.text(6)},
                           "action": {"kind": "llm", "name": self.text(6)},
                           "actual": {"unit": "TOKENS", "amount": amount}});
        let mode = ["commit", "event", "commit", "bogus"][self.0.usize(..4)];
        let mut rec = json!({"version": 1, "reservation_id": id, "base_url": "http://localhost",
                             "mode": mode, "commit_body": commit, "event_fallback_body": event,
                             "recorded_at_ms": int(self.u64v().into()), "not_before_ms": Value::Null});
        match self.0.u8(0..12) {
            0 => rec["version"] = json!(2),
            1 => rec["not_before_ms"] = int(self.i64v().into()),
            2 => rec["commit_body"] = Value::Null,
            3 => rec["event_fallback_body"] = Value::Null,
            4 => rec["extra_key_from_the_future"] = json!([1, 2]),
            5 => {
                rec.as_object_mut().expect("object").remove("mode");
            }
            6 => rec["reservation_id"] = json!(""),
            7 => rec["version"] = json!("1"),
            _ => {}
        }
        let text = if self.0.bool() {
            serde_json::to_string_pretty(&rec).expect("serialises")
        } else {
            rec.to_string()
        };
        if self.0.u8(0..10) == 0 {
            let mut cut = self.0.usize(0..text.len());
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text[..cut].to_string()
        } else {
            text
        }
    }
}
