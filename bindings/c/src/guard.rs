//! `cycles_guard`: one guarded action (the bridge's `Active`: core's reserve, heartbeat,
//! usage and settle-or-release), begun from typed C arguments or a JSON spec.

use std::ffi::{c_char, c_void, CStr, CString};
use std::ptr;

use cycles_bridge::{Active, ErrorFields};
use serde_json::{json, Map, Value};

use crate::client::cycles_client;
use crate::completion;
use crate::error::cycles_error;
use crate::handle::{
    clear_opt, free_box, set_opt, try_callback, try_out, try_ref, try_set_opt, with_ref,
    with_ref_out,
};
use crate::panic::{block, guard, or_default};
use crate::status::cycles_status;
use crate::strings::{arg, c_string, into_raw, opt_arg};

/// What the heartbeat does when it cannot keep the lease (core's `FailurePolicy`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum cycles_heartbeat_policy {
    /// Report it (events) and settle as usual (the default).
    CYCLES_HEARTBEAT_WARN = 0,
    /// Settle, then report the lapse in the outcome (`CYCLES_OUTCOME_HEARTBEAT_LAPSED`).
    CYCLES_HEARTBEAT_FAIL_ON_FINALIZE = 1,
    /// Mark the work cancelled (`cycles_guard_cancelled`) as soon as the lease is lost.
    CYCLES_HEARTBEAT_CANCEL = 2,
}

/// The subject of a reservation: each member NULL when unset. An all-NULL subject is left to
/// the bridge, which uses the client's tenant.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cycles_subject {
    /// Tenant.
    pub tenant: *const c_char,
    /// Workspace.
    pub workspace: *const c_char,
    /// App.
    pub app: *const c_char,
    /// Workflow.
    pub workflow: *const c_char,
    /// Agent.
    pub agent: *const c_char,
    /// Toolset.
    pub toolset: *const c_char,
}

/// A reservation to guard. Zero-initialise it (`cycles_reserve r = {0};`) and set what you
/// need: every zero or NULL member keeps its default. Only read during `cycles_guard_begin`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cycles_reserve {
    /// Idempotency key of the reservation; NULL: a fresh `cycles-<uuid>`. Settlement uses
    /// `<key>:commit` / `<key>:release`.
    pub idempotency_key: *const c_char,
    /// Who spends.
    pub subject: cycles_subject,
    /// Action kind (required), e.g. `"llm.completion"`.
    pub action_kind: *const c_char,
    /// Action name (required), e.g. `"openai:gpt-4o-mini"`.
    pub action_name: *const c_char,
    /// Unit; NULL: the client's default unit (option `default_unit`, `CYCLES_UNIT`), else
    /// `"USD_MICROCENTS"`.
    pub unit: *const c_char,
    /// The estimate to reserve, in `unit`.
    pub estimate: i64,
    /// Lease TTL in ms; 0: core's default (60 000).
    pub ttl_ms: i64,
    /// True: no heartbeat (the lease is not extended).
    pub no_heartbeat: bool,
    /// Heartbeat failure policy.
    pub policy: cycles_heartbeat_policy,
    /// Reservation metadata as a JSON object (kept exactly as written), or NULL.
    pub metadata_json: *const c_char,
}

/// A guarded action in progress (opaque). Thread-safe: usage may be reported from any thread
/// while the heartbeat runs by itself on core's runtime. Free with `cycles_guard_free`.
pub struct cycles_guard {
    active: Active,
    reservation_id: CString,
    decision: CString,
    info: CString,
}

impl cycles_guard {
    fn new(active: Active) -> cycles_guard {
        cycles_guard {
            reservation_id: c_string(active.reservation_id()),
            decision: c_string(active.decision()),
            info: c_string(&active.info_json()),
            active,
        }
    }
}

/// How a guarded action ended (core's `Finished`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum cycles_outcome_kind {
    /// The actual amount was settled (see `settlement`).
    CYCLES_OUTCOME_SETTLED = 0,
    /// The work failed. Usage it had reported (`cycles_guard_set_actual`, `cycles_guard_add`)
    /// was committed, journaled first like any commit (see `settlement`); with no usage
    /// reported the reservation was released (`CYCLES_SETTLEMENT_NONE`).
    CYCLES_OUTCOME_WORK_FAILED = 1,
    /// The work succeeded without reporting an actual: nothing was committed, the reservation
    /// was released in the same call (`released`; the JSON's `message` is core's text and
    /// `release_error` says why a failed release failed).
    CYCLES_OUTCOME_MISSING_ACTUAL = 2,
    /// The reported actual is invalid (negative): nothing was committed, the reservation was
    /// released (`released`, the JSON's `message`).
    CYCLES_OUTCOME_INVALID_ACTUAL = 3,
    /// Settled, but the heartbeat lapsed (`CYCLES_HEARTBEAT_FAIL_ON_FINALIZE`).
    CYCLES_OUTCOME_HEARTBEAT_LAPSED = 4,
    /// Ended early by `cycles_guard_release`: the estimate was given back (`released`).
    CYCLES_OUTCOME_RELEASED = 5,
}

/// What became of a settlement.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum cycles_settlement_status {
    /// No settlement (missing or invalid actual, or failed work released: no usage reported).
    CYCLES_SETTLEMENT_NONE = 0,
    /// Committed.
    CYCLES_SETTLEMENT_COMMITTED = 1,
    /// Recorded through the event fallback after the reservation expired.
    CYCLES_SETTLEMENT_RECOVERED_VIA_EVENT = 2,
    /// Not settled yet, replayed later: by this process or the next when journaled; only by
    /// this process when the journal could not take it (the JSON's `journaled` false and
    /// `journal_error`).
    CYCLES_SETTLEMENT_PENDING = 3,
    /// Rejected by the server.
    CYCLES_SETTLEMENT_REJECTED = 4,
}

/// The outcome of `cycles_guard_finish` as a struct (the full detail is its JSON).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cycles_outcome {
    /// How the action ended.
    pub kind: cycles_outcome_kind,
    /// What became of the settlement.
    pub settlement: cycles_settlement_status,
    /// Whether `actual` is set.
    pub has_actual: bool,
    /// The actual amount reported by the work.
    pub actual: i64,
    /// Whether `charged` is set (committed or recovered).
    pub has_charged: bool,
    /// The amount the server applied.
    pub charged: i64,
    /// Lease extensions the heartbeat made.
    pub extensions: u64,
    /// Failed extend attempts.
    pub heartbeat_failures: u64,
    /// Whether the reservation was released in this call (the JSON's `released`): true for
    /// a successful release (missing or invalid actual, failed work without usage,
    /// `CYCLES_OUTCOME_RELEASED`); false when nothing was released or the release failed.
    pub released: bool,
}

impl Default for cycles_outcome {
    fn default() -> Self {
        cycles_outcome {
            kind: cycles_outcome_kind::CYCLES_OUTCOME_SETTLED,
            settlement: cycles_settlement_status::CYCLES_SETTLEMENT_NONE,
            has_actual: false,
            actual: 0,
            has_charged: false,
            charged: 0,
            extensions: 0,
            heartbeat_failures: 0,
            released: false,
        }
    }
}

/// The bridge's names of the outcome kinds (the finished JSON's `outcome`), in enum order.
/// `outcome_of` reads the JSON with them, so the names C sees are the ones the bridge writes.
const OUTCOME_NAMES: [(cycles_outcome_kind, &CStr); 6] = {
    use cycles_outcome_kind::*;
    [
        (CYCLES_OUTCOME_SETTLED, c"settled"),
        (CYCLES_OUTCOME_WORK_FAILED, c"work_failed"),
        (CYCLES_OUTCOME_MISSING_ACTUAL, c"missing_actual"),
        (CYCLES_OUTCOME_INVALID_ACTUAL, c"invalid_actual"),
        (CYCLES_OUTCOME_HEARTBEAT_LAPSED, c"heartbeat_lapsed"),
        (CYCLES_OUTCOME_RELEASED, c"released"),
    ]
};

/// The bridge's names of the settlement states (`settlement.status`), in enum order; `none`
/// (no settlement: the JSON's `settlement` is null or absent) is this binding's.
const SETTLEMENT_NAMES: [(cycles_settlement_status, &CStr); 5] = {
    use cycles_settlement_status::*;
    [
        (CYCLES_SETTLEMENT_NONE, c"none"),
        (CYCLES_SETTLEMENT_COMMITTED, c"committed"),
        (
            CYCLES_SETTLEMENT_RECOVERED_VIA_EVENT,
            c"recovered_via_event",
        ),
        (CYCLES_SETTLEMENT_PENDING, c"pending"),
        (CYCLES_SETTLEMENT_REJECTED, c"rejected"),
    ]
};

fn by_name<T: Copy>(table: &[(T, &CStr)], name: Option<&str>) -> Option<T> {
    let name = name?;
    table
        .iter()
        .find(|(_, n)| n.to_bytes() == name.as_bytes())
        .map(|(v, _)| *v)
}

/// A `cycles_outcome_kind` as the name functions receive it: its integer, so that any value a
/// C caller passes is defined here (a Rust enum may only ever hold one of its variants). The
/// header shows the enum type (cbindgen.toml renames this one to it).
#[repr(transparent)]
#[derive(Clone, Copy, Debug)]
pub struct cycles_outcome_kind_value(pub u32);

/// A `cycles_settlement_status` as the name functions receive it (see
/// `cycles_outcome_kind_value`).
#[repr(transparent)]
#[derive(Clone, Copy, Debug)]
pub struct cycles_settlement_status_value(pub u32);

/// The name of an outcome kind, as the outcome JSON writes it (its `outcome`): `"settled"`,
/// `"work_failed"`, `"missing_actual"`, `"invalid_actual"`, `"heartbeat_lapsed"` or
/// `"released"`. A static
/// string (never freed). NULL for a value that is not a `cycles_outcome_kind`.
#[no_mangle]
pub extern "C" fn cycles_outcome_kind_name(kind: cycles_outcome_kind_value) -> *const c_char {
    or_default(|| {
        OUTCOME_NAMES
            .iter()
            .find(|(k, _)| *k as u32 == kind.0)
            .map_or(ptr::null(), |(_, n)| n.as_ptr())
    })
}

/// The name of a settlement status, as the outcome JSON writes it (its `settlement.status`):
/// `"committed"`, `"recovered_via_event"`, `"pending"` or `"rejected"`, and `"none"` for
/// `CYCLES_SETTLEMENT_NONE` (the JSON has no settlement then). A static string (never freed).
/// NULL for a value that is not a `cycles_settlement_status`.
#[no_mangle]
pub extern "C" fn cycles_settlement_status_name(
    status: cycles_settlement_status_value,
) -> *const c_char {
    or_default(|| {
        SETTLEMENT_NAMES
            .iter()
            .find(|(s, _)| *s as u32 == status.0)
            .map_or(ptr::null(), |(_, n)| n.as_ptr())
    })
}

/// The struct of the bridge's finished JSON (docs/bindings.md, "Guarded lifecycle").
fn outcome_of(v: &Value) -> cycles_outcome {
    let kind = by_name(&OUTCOME_NAMES, v["outcome"].as_str())
        .unwrap_or(cycles_outcome_kind::CYCLES_OUTCOME_SETTLED);
    let s = &v["settlement"];
    let settlement = by_name(&SETTLEMENT_NAMES, s["status"].as_str())
        .unwrap_or(cycles_settlement_status::CYCLES_SETTLEMENT_NONE);
    let actual = v["actual"].as_i64();
    let charged = s["charged"]["amount"].as_i64();
    cycles_outcome {
        kind,
        settlement,
        has_actual: actual.is_some(),
        actual: actual.unwrap_or(0),
        has_charged: charged.is_some(),
        charged: charged.unwrap_or(0),
        extensions: v["lease"]["extensions"].as_u64().unwrap_or(0),
        heartbeat_failures: v["lease"]["failures"].as_u64().unwrap_or(0),
        released: v["released"].as_bool().unwrap_or(false),
    }
}

/// The bridge's guard spec of a `cycles_reserve`.
unsafe fn spec_json(r: &cycles_reserve) -> Result<String, ErrorFields> {
    let s = &r.subject;
    let mut subject = Map::new();
    for (name, p) in [
        ("tenant", s.tenant),
        ("workspace", s.workspace),
        ("app", s.app),
        ("workflow", s.workflow),
        ("agent", s.agent),
        ("toolset", s.toolset),
    ] {
        if let Some(v) = opt_arg(p, &format!("subject.{name}"))? {
            subject.insert(name.into(), json!(v));
        }
    }
    let policy = match r.policy {
        cycles_heartbeat_policy::CYCLES_HEARTBEAT_WARN => "warn",
        cycles_heartbeat_policy::CYCLES_HEARTBEAT_FAIL_ON_FINALIZE => "fail_on_finalize",
        cycles_heartbeat_policy::CYCLES_HEARTBEAT_CANCEL => "cancel",
    };
    // Only what the caller set: the bridge fills the key, the subject (the client's tenant)
    // and the unit (the client's default unit), the same for every language.
    let mut spec = json!({
        "action": {"kind": arg(r.action_kind, "action_kind")?, "name": arg(r.action_name, "action_name")?},
        "estimate": r.estimate,
        "heartbeat": !r.no_heartbeat,
        "policy": policy,
    });
    if !subject.is_empty() {
        spec["subject"] = Value::Object(subject);
    }
    if let Some(k) = opt_arg(r.idempotency_key, "idempotency_key")? {
        spec["idempotency_key"] = json!(k);
    }
    if let Some(u) = opt_arg(r.unit, "unit")? {
        spec["unit"] = json!(u);
    }
    if r.ttl_ms != 0 {
        spec["ttl_ms"] = json!(r.ttl_ms);
    }
    let mut text = spec.to_string();
    if let Some(m) = opt_arg(r.metadata_json, "metadata_json")? {
        // Spliced in as written: metadata reaches the wire exactly (big integers, escapes).
        serde_json::from_str::<&serde_json::value::RawValue>(m)
            .map_err(|e| ErrorFields::invalid(format!("metadata_json: {e}")))?;
        text.pop();
        text.push_str(&format!(",\"metadata\":{m}}}"));
    }
    Ok(text)
}

unsafe fn begin(
    c: *const cycles_client,
    spec: impl FnOnce(&cycles_client) -> Result<String, ErrorFields>,
    out: *mut *mut cycles_guard,
) -> Result<(), ErrorFields> {
    let out = try_out(out, "out")?;
    let c = try_ref(c)?;
    let spec = spec(c)?;
    crate::panic::may_block()?;
    let life = c.life()?;
    let work = life.lifecycle.begin(&spec)?;
    let active = block(work)??;
    *out = Box::into_raw(Box::new(cycles_guard::new(active)));
    Ok(())
}

/// Reserves `r->estimate` and starts the heartbeat (blocking: one reservation request). On
/// success `*out` is a new guard owned by the caller: report usage, then
/// `cycles_guard_finish`, then `cycles_guard_free`. A denial is its error
/// (`CYCLES_BUDGET_EXCEEDED`, ...), `*out` stays NULL. Any thread; `CYCLES_RUNTIME` from an
/// event callback or on a closed client.
#[no_mangle]
pub unsafe extern "C" fn cycles_guard_begin(
    c: *const cycles_client,
    r: *const cycles_reserve,
    out: *mut *mut cycles_guard,
    err: *mut *mut cycles_error,
) -> cycles_status {
    guard(err, || {
        let r = try_ref(r)?;
        begin(c, |_| spec_json(r), out)
    })
}

/// `cycles_guard_begin` with the spec as JSON (docs/bindings.md, "Guarded lifecycle": also
/// `grace_period_ms` and `overage_policy`). `*out` as `cycles_guard_begin`.
#[no_mangle]
pub unsafe extern "C" fn cycles_guard_begin_json(
    c: *const cycles_client,
    spec_json: *const c_char,
    out: *mut *mut cycles_guard,
    err: *mut *mut cycles_error,
) -> cycles_status {
    guard(err, || {
        let spec = arg(spec_json, "spec_json")?;
        begin(c, |_| Ok(spec.to_string()), out)
    })
}

/// The completion of `cycles_guard_begin_async`: `CYCLES_OK` with a new `guard` OWNED BY THE
/// CALLEE (free it with `cycles_guard_free`, from any thread, after finishing it), or an error
/// status with `err` (valid only during the call) and `guard` NULL. Runs on the completion
/// thread (see `cycles_client_call_async`).
pub type cycles_guard_cb = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        status: cycles_status,
        guard: *mut cycles_guard,
        err: *const cycles_error,
    ),
>;

/// `cycles_guard_begin` without blocking: argument errors are returned here (then `cb` is
/// never called); otherwise the reservation is made on core's runtime and `cb` gets the guard
/// (or the denial) exactly once, on the completion thread, with `user_data`. Any thread,
/// including callbacks.
#[no_mangle]
pub unsafe extern "C" fn cycles_guard_begin_async(
    c: *const cycles_client,
    r: *const cycles_reserve,
    cb: cycles_guard_cb,
    user_data: *mut c_void,
    err: *mut *mut cycles_error,
) -> cycles_status {
    guard(err, || {
        let r = try_ref(r)?;
        let f = try_callback(cb, "cb")?;
        let c = try_ref(c)?;
        let spec = spec_json(r)?;
        let work = c.life()?.lifecycle.begin(&spec)?;
        let ud = completion::UserData(user_data);
        completion::submit(work, move |res| {
            let ud = ud;
            let (status, e) = completion::status_and_error(&res);
            let g = res.ok().map_or(ptr::null_mut(), |active| {
                Box::into_raw(Box::new(cycles_guard::new(active)))
            });
            // SAFETY: the callback's contract; ownership of `g` passes to it.
            unsafe { f(ud.0, status, g, completion::error_ptr(&e)) };
        })
    })
}

/// The completion of `cycles_guard_finish_async`: `CYCLES_OK` with the outcome struct and its
/// JSON (`len` bytes without the NUL), or an error status with `err`; every pointer is valid
/// only during the call. Runs on the completion thread (see `cycles_client_call_async`).
pub type cycles_outcome_cb = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        status: cycles_status,
        outcome: *const cycles_outcome,
        outcome_json: *const c_char,
        len: usize,
        err: *const cycles_error,
    ),
>;

/// `cycles_guard_finish` without blocking: a second finish is returned here as
/// `CYCLES_INVALID_ARGUMENT` (then `cb` is never called); otherwise the settlement (or, for
/// failed work that reported no usage, the release) runs on core's runtime and `cb` gets the
/// outcome exactly once, on the completion thread, with `user_data`. The guard may be freed
/// as soon as this returns. Any thread, including callbacks.
#[no_mangle]
pub unsafe extern "C" fn cycles_guard_finish_async(
    g: *const cycles_guard,
    work_succeeded: bool,
    cb: cycles_outcome_cb,
    user_data: *mut c_void,
    err: *mut *mut cycles_error,
) -> cycles_status {
    guard(err, || {
        let f = try_callback(cb, "cb")?;
        let g = try_ref(g)?;
        let work = g.active.finish(work_succeeded)?;
        let ud = completion::UserData(user_data);
        completion::submit(async move { Ok(work.await) }, move |res| {
            let ud = ud;
            let parsed = res.and_then(|text| {
                serde_json::from_str::<Value>(&text)
                    .map(|v| (outcome_of(&v), c_string(&text)))
                    .map_err(|e| ErrorFields::internal(format!("cannot read the outcome: {e}")))
            });
            let (status, e) = completion::status_and_error(&parsed);
            let (o, t, len) = match &parsed {
                Ok((o, t)) => (o as *const cycles_outcome, t.as_ptr(), t.as_bytes().len()),
                Err(_) => (ptr::null(), ptr::null(), 0),
            };
            // SAFETY: the callback's contract; everything pointed to lives across the call.
            unsafe { f(ud.0, status, o, t, len, completion::error_ptr(&e)) };
        })
    })
}

/// The reservation id; owned by the guard (valid until `cycles_guard_free`). NULL for NULL.
#[no_mangle]
pub unsafe extern "C" fn cycles_guard_reservation_id(g: *const cycles_guard) -> *const c_char {
    with_ref(g, |g| g.reservation_id.as_ptr())
}

/// The server's decision on the reservation: `"ALLOW"` or `"ALLOW_WITH_CAPS"` (then honour
/// the caps of `cycles_guard_info_json`). Owned by the guard (valid until `cycles_guard_free`).
/// NULL for NULL.
#[no_mangle]
pub unsafe extern "C" fn cycles_guard_decision(g: *const cycles_guard) -> *const c_char {
    with_ref(g, |g| g.decision.as_ptr())
}

/// The guard's facts as JSON: `{"reservation_id", "decision", "caps"}`, `caps` null under
/// `ALLOW`, else the caps object with its set members only (`max_tokens`,
/// `max_steps_remaining`, `tool_allowlist`, `tool_denylist`, `cooldown_ms`). Owned by the
/// guard (valid until `cycles_guard_free`). NULL for NULL.
#[no_mangle]
pub unsafe extern "C" fn cycles_guard_info_json(g: *const cycles_guard) -> *const c_char {
    with_ref(g, |g| g.info.as_ptr())
}

/// Ends the action early (blocking): releases the reservation (`<key>:release`, `reason` or
/// NULL) and gives the estimate back; the outcome is `CYCLES_OUTCOME_RELEASED`, `*out` /
/// `*out_json` as `cycles_guard_finish`. `CYCLES_INVALID_ARGUMENT` once usage was reported (a
/// release would drop a known actual): the action goes on, end it with `cycles_guard_finish`.
/// After a successful release the guard is finished (a later finish or release is
/// `CYCLES_INVALID_ARGUMENT`).
#[no_mangle]
pub unsafe extern "C" fn cycles_guard_release(
    g: *const cycles_guard,
    reason: *const c_char,
    out: *mut cycles_outcome,
    out_json: *mut *mut c_char,
    err: *mut *mut cycles_error,
) -> cycles_status {
    clear_opt(out_json);
    guard(err, || {
        let g = try_ref(g)?;
        let reason = opt_arg(reason, "reason")?.map(str::to_string);
        crate::panic::may_block()?;
        let work = g.active.release(reason)?;
        let text = block(work)?;
        write_outcome(&text, out, out_json)
    })
}

unsafe fn write_outcome(
    text: &str,
    out: *mut cycles_outcome,
    out_json: *mut *mut c_char,
) -> Result<(), ErrorFields> {
    try_set_opt(out, || {
        let v: Value = serde_json::from_str(text)
            .map_err(|e| ErrorFields::internal(format!("cannot read the outcome: {e}")))?;
        Ok(outcome_of(&v))
    })?;
    set_opt(out_json, || into_raw(text));
    Ok(())
}

/// Sets the actual amount (replaces earlier reports). Any thread; does not block.
/// `CYCLES_INVALID_ARGUMENT` once the action has finished: the amount would not be settled.
#[no_mangle]
pub unsafe extern "C" fn cycles_guard_set_actual(
    g: *const cycles_guard,
    amount: i64,
    err: *mut *mut cycles_error,
) -> cycles_status {
    guard(err, || Ok(try_ref(g)?.active.usage().set_actual(amount)?))
}

/// Adds to the actual amount (streaming usage). Any thread; does not block.
/// `CYCLES_INVALID_ARGUMENT` once the action has finished.
#[no_mangle]
pub unsafe extern "C" fn cycles_guard_add(
    g: *const cycles_guard,
    amount: i64,
    err: *mut *mut cycles_error,
) -> cycles_status {
    guard(err, || Ok(try_ref(g)?.active.usage().add(amount)?))
}

/// The actual reported so far: true and `*out` when one was reported.
#[no_mangle]
pub unsafe extern "C" fn cycles_guard_actual(g: *const cycles_guard, out: *mut i64) -> bool {
    with_ref_out(g, out, |g, out| match g.active.usage().actual() {
        Some(a) => {
            *out = a;
            true
        }
        None => false,
    })
}

/// Sets the commit's `metrics` (JSON object, kept exactly as written).
#[no_mangle]
pub unsafe extern "C" fn cycles_guard_set_metrics_json(
    g: *const cycles_guard,
    json: *const c_char,
    err: *mut *mut cycles_error,
) -> cycles_status {
    guard(err, || {
        let g = try_ref(g)?;
        Ok(g.active.usage().set_metrics_json(arg(json, "json")?)?)
    })
}

/// Sets the commit's `metadata` (JSON object, kept exactly as written).
#[no_mangle]
pub unsafe extern "C" fn cycles_guard_set_metadata_json(
    g: *const cycles_guard,
    json: *const c_char,
    err: *mut *mut cycles_error,
) -> cycles_status {
    guard(err, || {
        let g = try_ref(g)?;
        Ok(g.active.usage().set_metadata_json(arg(json, "json")?)?)
    })
}

/// True once the heartbeat cancelled the work (`CYCLES_HEARTBEAT_CANCEL`); poll it in long
/// work. False for NULL.
#[no_mangle]
pub unsafe extern "C" fn cycles_guard_cancelled(g: *const cycles_guard) -> bool {
    with_ref(g, |g| g.active.usage().cancellation().is_cancelled())
}

/// Ends the action (blocking): stops the heartbeat, then commits the actual (journaled first;
/// retried; replayed later when the server is away). When `work_succeeded` is false the usage
/// reported so far is still committed that way (it was spent): the outcome is
/// `CYCLES_OUTCOME_WORK_FAILED` with that settlement; only with no usage reported is the
/// reservation released instead (`CYCLES_SETTLEMENT_NONE`, `released`). When the work
/// succeeded without an actual (or with a negative one) nothing is committed: the reservation
/// is released in the same call (`CYCLES_OUTCOME_MISSING_ACTUAL` / `_INVALID_ACTUAL`,
/// `released`; the JSON's `message` is core's text to show). `*out` (NULL: not wanted)
/// receives the outcome struct, `*out_json` (NULL: not wanted) the full outcome JSON (free
/// with `cycles_string_free`). A second call is `CYCLES_INVALID_ARGUMENT`. Returns
/// `CYCLES_OK` whatever the outcome: read `kind` and `settlement`
/// (`cycles_outcome_kind_name`, `cycles_settlement_status_name` give their names).
#[no_mangle]
pub unsafe extern "C" fn cycles_guard_finish(
    g: *const cycles_guard,
    work_succeeded: bool,
    out: *mut cycles_outcome,
    out_json: *mut *mut c_char,
    err: *mut *mut cycles_error,
) -> cycles_status {
    clear_opt(out_json);
    guard(err, || {
        let g = try_ref(g)?;
        crate::panic::may_block()?;
        let work = g.active.finish(work_succeeded)?;
        let text = block(work)?;
        write_outcome(&text, out, out_json)
    })
}

/// Frees a guard (NULL: no-op). A guard never finished is left to core, which releases or
/// settles it as its drop does (docs/lifecycle.md). Not concurrently with other calls on it.
#[no_mangle]
pub unsafe extern "C" fn cycles_guard_free(g: *mut cycles_guard) {
    free_box(g);
}

#[cfg(test)]
mod tests {
    use super::*;
    use cycles_core::guard::Finished;
    use cycles_core::settle::{Rejection, SettleOutcome};
    use cycles_core::ErrorKind;

    fn name(p: *const c_char) -> Option<&'static str> {
        // SAFETY: the name functions return NULL or a static NUL-terminated string.
        (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_str().unwrap())
    }

    /// The bridge's finished JSON of core's outcomes, read back: the names the functions give
    /// are the ones in the JSON, for every outcome the bridge can write without a live lease.
    #[test]
    fn names_are_the_bridges_json_names() {
        let committed = serde_json::from_value(json!({
            "status": "COMMITTED", "charged": {"unit": "USD_MICROCENTS", "amount": 5}
        }))
        .unwrap();
        let pending = SettleOutcome::Pending {
            reason: "server away".into(),
            last_error: Some(ErrorKind::ServerError),
            journaled: true,
            journal_error: None,
            not_before_ms: None,
        };
        let rejected = SettleOutcome::Rejected(Rejection {
            kind: ErrorKind::BudgetExceeded,
            message: "no budget".into(),
            http_status: Some(409),
            server_code: Some("BUDGET_EXCEEDED".into()),
        });
        let finished = [
            Finished::Settled {
                reservation_id: "r1".into(),
                actual: cycles_core::Amount::new(cycles_core::Unit::UsdMicrocents, 5),
                settlement: SettleOutcome::Committed(committed),
                lease: None,
            },
            Finished::WorkFailed {
                reservation_id: "r2".into(),
                settlement: Some(pending),
                release_error: None,
                lease: None,
            },
            Finished::WorkFailed {
                reservation_id: "r3".into(),
                settlement: Some(rejected),
                release_error: None,
                lease: None,
            },
            Finished::WorkFailed {
                reservation_id: "r4".into(),
                settlement: None,
                release_error: None,
                lease: None,
            },
            Finished::MissingActual {
                reservation_id: "r5".into(),
                release_error: None,
                lease: None,
            },
            Finished::InvalidActual {
                reservation_id: "r6".into(),
                actual: -1,
                release_error: None,
            },
            Finished::Released {
                reservation_id: "r7".into(),
                release_error: None,
                lease: None,
            },
        ];
        let mut seen = Vec::new();
        for f in &finished {
            let v: Value = serde_json::from_str(&cycles_bridge::guard::finished_text(f)).unwrap();
            let o = outcome_of(&v);
            let kind = cycles_outcome_kind_name(cycles_outcome_kind_value(o.kind as u32));
            assert_eq!(name(kind), v["outcome"].as_str(), "{v}");
            let status =
                cycles_settlement_status_name(cycles_settlement_status_value(o.settlement as u32));
            assert_eq!(
                name(status),
                Some(v["settlement"]["status"].as_str().unwrap_or("none")),
                "{v}"
            );
            seen.push(name(status).unwrap());
        }
        assert_eq!(
            seen,
            [
                "committed",
                "pending",
                "rejected",
                "none",
                "none",
                "none",
                "none"
            ]
        );
    }

    #[test]
    fn every_value_has_its_name_and_others_none() {
        for (i, (k, n)) in OUTCOME_NAMES.iter().enumerate() {
            assert_eq!(*k as usize, i, "OUTCOME_NAMES is in enum order");
            assert_eq!(
                name(cycles_outcome_kind_name(cycles_outcome_kind_value(
                    i as u32
                ))),
                n.to_str().ok()
            );
        }
        for (i, (s, n)) in SETTLEMENT_NAMES.iter().enumerate() {
            assert_eq!(*s as usize, i, "SETTLEMENT_NAMES is in enum order");
            assert_eq!(
                name(cycles_settlement_status_name(
                    cycles_settlement_status_value(i as u32)
                )),
                n.to_str().ok()
            );
        }
        for bad in [6, 99, u32::MAX] {
            assert!(cycles_outcome_kind_name(cycles_outcome_kind_value(bad)).is_null());
        }
        for bad in [5, 99, u32::MAX] {
            assert!(cycles_settlement_status_name(cycles_settlement_status_value(bad)).is_null());
        }
    }
}
