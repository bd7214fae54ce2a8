//! Strict "schema-valid success" predicates, one per operation.
//!
//! The spec (HEARTBEAT GUIDANCE and the recovery profile, C6) says only a schema-valid
//! response with the exact expected status proves success; any other 2xx is ambiguous and
//! must not be trusted (e.g. for scheduling a heartbeat or deleting a journal record).
//! These are pure functions over `(status, &J)`, any [`JsonView`] (a `serde_json::Value`, or
//! the [`BorrowedJson`](super::json_view::BorrowedJson) the client parses each response into),
//! kept apart from decoding: decoding is
//! lenient (unknown fields and enum values tolerated), the predicate is strict about what the
//! schema requires (exact status, required fields, JSON types, closed enums, `minimum: 0`).
//! Unknown extra fields never fail a predicate: additive server releases must not break users.
//!
//! An explicit JSON `null` on an OPTIONAL field counts as absent (the reference server writes
//! `null` for unset subject/action members and for `next_cursor` on a last page; see
//! docs/contracts.md, "Null handling"). A `null` on a REQUIRED field still fails.

use std::fmt::Display;

pub use super::json_view::JsonView;
#[cfg(test)]
use serde_json::Value;

/// Why a response is not a schema-valid success.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemaViolation(pub String);

impl std::fmt::Display for SchemaViolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

type Check = Result<(), SchemaViolation>;

fn fail<T>(msg: impl Into<String>) -> Result<T, SchemaViolation> {
    Err(SchemaViolation(msg.into()))
}

fn status_is(got: u16, want: u16) -> Check {
    if got == want {
        Ok(())
    } else {
        fail(format!("expected HTTP {want}, got {got}"))
    }
}

// Labels are `impl Display` and formatted only when a check fails: callers pass
// `format_args!`, so a valid body (every response) formats nothing.

/// `v` itself, once it is known to be an object.
fn object<J: JsonView>(v: &J, what: impl Display) -> Result<&J, SchemaViolation> {
    if v.is_object() {
        Ok(v)
    } else {
        fail(format!("{what} is not a JSON object"))
    }
}

fn req<'a, J: JsonView>(o: &'a J, k: &str) -> Result<&'a J, SchemaViolation> {
    o.get(k)
        .map_or_else(|| fail(format!("missing required field `{k}`")), Ok)
}

fn is_int<J: JsonView>(v: &J) -> bool {
    // int64 on the wire: a JSON integer that fits i64 (floats such as 1.5 or 1e3 are not).
    v.as_i64().is_some()
}

fn int<J: JsonView>(v: &J, k: impl Display, min0: bool) -> Check {
    match v.as_i64() {
        Some(n) if min0 && n < 0 => fail(format!("`{k}` must be >= 0, got {n}")),
        Some(_) => Ok(()),
        None => fail(format!("`{k}` must be an int64 integer")),
    }
}

fn string<J: JsonView>(v: &J, k: &str) -> Check {
    string_labelled(v, k)
}

fn string_labelled<J: JsonView>(v: &J, k: impl Display) -> Check {
    if v.is_string() {
        Ok(())
    } else {
        fail(format!("`{k}` must be a string"))
    }
}

fn one_of<J: JsonView>(v: &J, k: &str, allowed: &[&str]) -> Check {
    match v.as_str() {
        Some(s) if allowed.contains(&s) => Ok(()),
        Some(s) => fail(format!("`{k}` must be one of {allowed:?}, got {s:?}")),
        None => fail(format!("`{k}` must be a string")),
    }
}

fn string_array<J: JsonView>(v: &J, k: &str) -> Check {
    match v.as_array() {
        Some(a) if a.iter().all(J::is_string) => Ok(()),
        _ => fail(format!("`{k}` must be an array of strings")),
    }
}

/// Runs `f` on the field when present and not `null`: an explicit `null` on an optional
/// field means "absent" (what the reference server sends for unset optionals).
fn opt<J: JsonView>(o: &J, k: &str, f: impl Fn(&J, &str) -> Check) -> Check {
    match o.get(k) {
        Some(v) if !v.is_null() => f(v, k),
        _ => Ok(()),
    }
}

/// True when the optional field `k` is present with a non-null value.
fn has<J: JsonView>(o: &J, k: &str) -> bool {
    o.get(k).is_some_and(|v| !v.is_null())
}

fn amount_impl<J: JsonView>(v: &J, k: &str, min0: bool) -> Check {
    let o = object(v, format_args!("`{k}`"))?;
    // The unit must be a string but need not be known: new units are additive.
    string_labelled(req(o, "unit")?, format_args!("{k}.unit"))?;
    int(req(o, "amount")?, format_args!("{k}.amount"), min0)
}

fn amount<J: JsonView>(v: &J, k: &str) -> Check {
    amount_impl(v, k, true)
}

fn signed_amount<J: JsonView>(v: &J, k: &str) -> Check {
    amount_impl(v, k, false)
}

fn int_min0<J: JsonView>(v: &J, k: &str) -> Check {
    int(v, k, true)
}

fn int_any<J: JsonView>(v: &J, k: &str) -> Check {
    int(v, k, false)
}

fn boolean<J: JsonView>(v: &J, k: &str) -> Check {
    if v.is_boolean() {
        Ok(())
    } else {
        fail(format!("`{k}` must be a boolean"))
    }
}

fn json_object<J: JsonView>(v: &J, k: &str) -> Check {
    object(v, format_args!("`{k}`")).map(|_| ())
}

fn evidence_ref<J: JsonView>(v: &J, k: &str) -> Check {
    let o = object(v, format_args!("`{k}`"))?;
    string(req(o, "evidence_id")?, "evidence_id")?;
    string(req(o, "cycles_evidence_url")?, "cycles_evidence_url")
}

fn caps<J: JsonView>(v: &J, k: &str) -> Check {
    let o = object(v, format_args!("`{k}`"))?;
    opt(o, "max_tokens", int_min0)?;
    opt(o, "max_steps_remaining", int_min0)?;
    opt(o, "cooldown_ms", int_min0)?;
    opt(o, "tool_allowlist", string_array)?;
    opt(o, "tool_denylist", string_array)
}

fn balance<J: JsonView>(v: &J, k: &str) -> Check {
    let o = object(v, format_args!("`{k}` item"))?;
    string(req(o, "scope")?, "scope")?;
    string(req(o, "scope_path")?, "scope_path")?;
    signed_amount(req(o, "remaining")?, "remaining")?;
    for f in ["reserved", "spent", "debt", "allocated", "overdraft_limit"] {
        opt(o, f, amount)?;
    }
    opt(o, "is_over_limit", boolean)
}

fn balances<J: JsonView>(v: &J, k: &str) -> Check {
    match v.as_array() {
        Some(a) => a.iter().try_for_each(|b| balance(b, k)),
        None => fail(format!("`{k}` must be an array")),
    }
}

fn subject<J: JsonView>(v: &J, k: &str) -> Check {
    let o = object(v, format_args!("`{k}`"))?;
    let std_fields = ["tenant", "workspace", "app", "workflow", "agent", "toolset"];
    for f in std_fields {
        opt(o, f, string)?;
    }
    if !std_fields.iter().any(|f| has(o, f)) {
        return fail(format!("`{k}` has no standard field"));
    }
    opt(o, "dimensions", |v, k| {
        let d = object(v, format_args!("`{k}`"))?;
        if d.object_values().all(J::is_string) {
            Ok(())
        } else {
            fail("`dimensions` values must be strings")
        }
    })
}

fn action<J: JsonView>(v: &J, k: &str) -> Check {
    let o = object(v, format_args!("`{k}`"))?;
    string(req(o, "kind")?, "action.kind")?;
    string(req(o, "name")?, "action.name")?;
    opt(o, "tags", string_array)
}

const DECISIONS: &[&str] = &["ALLOW", "ALLOW_WITH_CAPS", "DENY"];

/// `createReservation`: HTTP 200 `ReservationCreateResponse`.
///
/// Whether `reservation_id` must be present depends on `dry_run` and the decision, which
/// this predicate cannot see; callers that need a live reservation check it themselves.
pub fn create_reservation<J: JsonView>(status: u16, body: &J) -> Check {
    status_is(status, 200)?;
    let o = object(body, "body")?;
    one_of(req(o, "decision")?, "decision", DECISIONS)?;
    string_array(req(o, "affected_scopes")?, "affected_scopes")?;
    opt(o, "reservation_id", string)?;
    opt(o, "reserved", amount)?;
    opt(o, "expires_at_ms", int_min0)?;
    opt(o, "remaining_ttl_ms", int_min0)?;
    opt(o, "scope_path", string)?;
    opt(o, "caps", caps)?;
    opt(o, "balances", balances)?;
    opt(o, "reason_code", string)?;
    opt(o, "retry_after_ms", int_min0)?;
    opt(o, "cycles_evidence", evidence_ref)
}

/// `commitReservation`: HTTP 200 `CommitResponse` with `status: COMMITTED`.
pub fn commit_reservation<J: JsonView>(status: u16, body: &J) -> Check {
    status_is(status, 200)?;
    let o = object(body, "body")?;
    one_of(req(o, "status")?, "status", &["COMMITTED"])?;
    amount(req(o, "charged")?, "charged")?;
    opt(o, "released", amount)?;
    opt(o, "balances", balances)?;
    opt(o, "cycles_evidence", evidence_ref)
}

/// `releaseReservation`: HTTP 200 `ReleaseResponse` with `status: RELEASED`.
pub fn release_reservation<J: JsonView>(status: u16, body: &J) -> Check {
    status_is(status, 200)?;
    let o = object(body, "body")?;
    one_of(req(o, "status")?, "status", &["RELEASED"])?;
    amount(req(o, "released")?, "released")?;
    opt(o, "balances", balances)?;
    opt(o, "cycles_evidence", evidence_ref)
}

/// `extendReservation`: HTTP 200 `ReservationExtendResponse` with `status: ACTIVE`.
pub fn extend_reservation<J: JsonView>(status: u16, body: &J) -> Check {
    status_is(status, 200)?;
    let o = object(body, "body")?;
    one_of(req(o, "status")?, "status", &["ACTIVE"])?;
    int_min0(req(o, "expires_at_ms")?, "expires_at_ms")?;
    opt(o, "remaining_ttl_ms", int_min0)?;
    opt(o, "balances", balances)
}

/// `decide`: HTTP 200 `DecisionResponse`.
pub fn decide<J: JsonView>(status: u16, body: &J) -> Check {
    status_is(status, 200)?;
    let o = object(body, "body")?;
    one_of(req(o, "decision")?, "decision", DECISIONS)?;
    opt(o, "caps", caps)?;
    opt(o, "reason_code", string)?;
    opt(o, "retry_after_ms", int_min0)?;
    opt(o, "affected_scopes", string_array)?;
    opt(o, "cycles_evidence", evidence_ref)
}

/// `createEvent`: HTTP **201** `EventCreateResponse` with `status: APPLIED`.
pub fn create_event<J: JsonView>(status: u16, body: &J) -> Check {
    status_is(status, 201)?;
    let o = object(body, "body")?;
    one_of(req(o, "status")?, "status", &["APPLIED"])?;
    string(req(o, "event_id")?, "event_id")?;
    opt(o, "charged", amount)?;
    opt(o, "balances", balances)
}

/// `getBalances`: HTTP 200 `BalanceResponse`.
pub fn get_balances<J: JsonView>(status: u16, body: &J) -> Check {
    status_is(status, 200)?;
    let o = object(body, "body")?;
    balances(req(o, "balances")?, "balances")?;
    opt(o, "next_cursor", string)?;
    opt(o, "has_more", boolean)
}

/// Shared by `ReservationDetail` and `ReservationSummary`. The summary schema puts
/// `minimum: 0` on its timestamps; the detail schema does not, hence `min0`.
fn reservation_row<J: JsonView>(v: &J, what: &str, min0: bool) -> Check {
    let o = object(v, what)?;
    let ts = if min0 { int_min0 } else { int_any };
    string(req(o, "reservation_id")?, "reservation_id")?;
    // ReservationStatus may grow new terminal states (v1+), so any string is accepted.
    string(req(o, "status")?, "status")?;
    subject(req(o, "subject")?, "subject")?;
    action(req(o, "action")?, "action")?;
    amount(req(o, "reserved")?, "reserved")?;
    ts(req(o, "created_at_ms")?, "created_at_ms")?;
    ts(req(o, "expires_at_ms")?, "expires_at_ms")?;
    string(req(o, "scope_path")?, "scope_path")?;
    string_array(req(o, "affected_scopes")?, "affected_scopes")?;
    opt(o, "idempotency_key", string)?;
    opt(o, "committed", amount)?;
    opt(o, "finalized_at_ms", ts)?;
    opt(o, "metadata", json_object)?;
    opt(o, "committed_metadata", json_object)?;
    opt(o, "evidence", |v, k| {
        let e = object(v, format_args!("`{k}`"))?;
        for f in ["reserve", "commit", "release"] {
            opt(e, f, evidence_ref)?;
        }
        Ok(())
    })
}

/// `getReservation`: HTTP 200 `ReservationDetail`.
pub fn get_reservation<J: JsonView>(status: u16, body: &J) -> Check {
    status_is(status, 200)?;
    reservation_row(body, "body", false)
}

/// `listReservations`: HTTP 200 `ReservationListResponse`.
pub fn list_reservations<J: JsonView>(status: u16, body: &J) -> Check {
    status_is(status, 200)?;
    let o = object(body, "body")?;
    match req(o, "reservations")?.as_array() {
        Some(rows) => rows
            .iter()
            .try_for_each(|r| reservation_row(r, "`reservations` item", true))?,
        None => return fail("`reservations` must be an array"),
    }
    opt(o, "next_cursor", string)?;
    opt(o, "has_more", boolean)
}

/// `getEvidence`: HTTP 200 `CyclesEvidenceEnvelope` (extra members allowed).
pub fn get_evidence<J: JsonView>(status: u16, body: &J) -> Check {
    status_is(status, 200)?;
    let o = object(body, "body")?;
    for f in [
        "schema_version",
        "artifact_type",
        "server_id",
        "signer_did",
        "evidence_id",
        "signature",
    ] {
        string(req(o, f)?, f)?;
    }
    int_any(req(o, "issued_at_ms")?, "issued_at_ms")?;
    json_object(req(o, "payload")?, "payload")?;
    opt(o, "trace_id", string)
}

/// `getEvidenceJwks`: HTTP 200 `CyclesEvidenceJwks` (extra members allowed).
pub fn get_evidence_jwks<J: JsonView>(status: u16, body: &J) -> Check {
    status_is(status, 200)?;
    let o = object(body, "body")?;
    let keys = req(o, "keys")?;
    let Some(keys) = keys.as_array() else {
        return fail("`keys` must be an array");
    };
    for k in keys {
        let ko = object(k, "`keys` item")?;
        for f in ["kty", "crv", "x", "kid"] {
            string(req(ko, f)?, f)?;
        }
        int_any(req(ko, "cycles_nbf_ms")?, "cycles_nbf_ms")?;
        opt(ko, "alg", string)?;
        // `cycles_exp_ms` is declared nullable ([integer, null]); `opt` skips `null` anyway.
        opt(ko, "cycles_exp_ms", |v, _| {
            if is_int(v) {
                Ok(())
            } else {
                fail("`cycles_exp_ms` must be an integer or null")
            }
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn amt(n: i64) -> Value {
        json!({"unit": "USD_MICROCENTS", "amount": n})
    }

    fn bal() -> Value {
        json!({"scope": "tenant:a", "scope_path": "tenant:a", "remaining": amt(-5), "reserved": amt(1)})
    }

    fn row() -> Value {
        json!({
            "reservation_id": "r1", "status": "ACTIVE",
            "subject": {"tenant": "a"}, "action": {"kind": "k", "name": "n"},
            "reserved": amt(1), "created_at_ms": 1, "expires_at_ms": 2,
            "scope_path": "tenant:a", "affected_scopes": ["tenant:a"]
        })
    }

    fn without(v: &Value, k: &str) -> Value {
        let mut v = v.clone();
        v.as_object_mut().unwrap().remove(k);
        v
    }

    fn with(v: &Value, k: &str, x: Value) -> Value {
        let mut v = v.clone();
        v.as_object_mut().unwrap().insert(k.to_string(), x);
        v
    }

    /// Checks the common rules for one predicate: the valid body passes (also with an
    /// unknown extra field), other statuses fail, each required field is required.
    fn common(p: fn(u16, &Value) -> Check, ok_status: u16, valid: Value, required: &[&str]) {
        assert_eq!(p(ok_status, &valid), Ok(()));
        assert!(p(
            ok_status,
            &with(&valid, "unknown_future_field", json!({"a": 1}))
        )
        .is_ok());
        for s in [200u16, 201, 202, 204, 299] {
            if s != ok_status {
                assert!(p(s, &valid).is_err(), "status {s} must fail");
            }
        }
        for k in required {
            assert!(p(ok_status, &without(&valid, k)).is_err(), "missing {k}");
            assert!(
                p(ok_status, &with(&valid, k, Value::Null)).is_err(),
                "null {k}"
            );
        }
        // Every optional field of the valid body may be an explicit null (= absent).
        for k in valid.as_object().unwrap().keys() {
            if !required.contains(&k.as_str()) {
                assert_eq!(
                    p(ok_status, &with(&valid, k, Value::Null)),
                    Ok(()),
                    "null {k}"
                );
            }
        }
        assert!(p(ok_status, &json!([])).is_err());
        assert!(p(ok_status, &json!("x")).is_err());
        assert!(p(ok_status, &Value::Null).is_err());
    }

    #[test]
    fn create_reservation_predicate() {
        let v = json!({
            "decision": "ALLOW", "reservation_id": "r", "reserved": amt(5),
            "expires_at_ms": 100, "remaining_ttl_ms": 60, "scope_path": "tenant:a",
            "affected_scopes": ["tenant:a"], "balances": [bal()],
            "cycles_evidence": {"evidence_id": "e", "cycles_evidence_url": "u"}
        });
        common(
            create_reservation,
            200,
            v.clone(),
            &["decision", "affected_scopes"],
        );
        assert!(create_reservation(200, &with(&v, "decision", json!("MAYBE"))).is_err());
        assert!(create_reservation(200, &with(&v, "remaining_ttl_ms", json!(-1))).is_err());
        assert!(create_reservation(200, &with(&v, "remaining_ttl_ms", json!(1.5))).is_err());
        assert!(create_reservation(200, &with(&v, "expires_at_ms", json!("100"))).is_err());
        assert!(create_reservation(200, &with(&v, "reserved", amt(-1))).is_err());
        assert!(create_reservation(200, &with(&v, "affected_scopes", json!([1]))).is_err());
        // A null optional is absent; a null required field still fails.
        assert!(create_reservation(200, &with(&v, "reservation_id", json!(null))).is_ok());
        assert!(create_reservation(200, &with(&v, "decision", json!(null))).is_err());
        assert!(create_reservation(200, &with(&v, "affected_scopes", json!(null))).is_err());
        // An unknown unit is not a schema violation of the response shape.
        let unk = json!({"unit": "NEW_UNIT", "amount": 5});
        assert!(create_reservation(200, &with(&v, "reserved", unk)).is_ok());
        // Dry-run DENY with a reason code.
        let deny = json!({"decision": "DENY", "affected_scopes": [], "reason_code": "X_NEW"});
        assert!(create_reservation(200, &deny).is_ok());
    }

    #[test]
    fn commit_predicate() {
        let v = json!({"status": "COMMITTED", "charged": amt(3), "released": amt(2), "balances": [bal()]});
        common(commit_reservation, 200, v.clone(), &["status", "charged"]);
        assert!(commit_reservation(200, &with(&v, "status", json!("RELEASED"))).is_err());
        assert!(commit_reservation(200, &with(&v, "charged", json!(3))).is_err());
        assert!(commit_reservation(200, &with(&v, "balances", json!([{"scope": "x"}]))).is_err());
    }

    #[test]
    fn release_predicate() {
        let v = json!({"status": "RELEASED", "released": amt(3)});
        common(release_reservation, 200, v.clone(), &["status", "released"]);
        assert!(release_reservation(200, &with(&v, "status", json!("COMMITTED"))).is_err());
    }

    #[test]
    fn extend_predicate() {
        let v = json!({"status": "ACTIVE", "expires_at_ms": 10, "remaining_ttl_ms": 0});
        common(
            extend_reservation,
            200,
            v.clone(),
            &["status", "expires_at_ms"],
        );
        assert!(extend_reservation(200, &without(&v, "remaining_ttl_ms")).is_ok());
        assert!(extend_reservation(200, &with(&v, "status", json!("EXPIRED"))).is_err());
        assert!(extend_reservation(200, &with(&v, "expires_at_ms", json!(-1))).is_err());
        assert!(extend_reservation(200, &with(&v, "remaining_ttl_ms", json!("5"))).is_err());
        assert!(extend_reservation(200, &with(&v, "remaining_ttl_ms", json!(1e3))).is_err());
    }

    #[test]
    fn decide_predicate() {
        let v = json!({"decision": "ALLOW_WITH_CAPS", "caps": {"max_tokens": 5}, "affected_scopes": ["a"]});
        common(decide, 200, v.clone(), &["decision"]);
        assert!(decide(200, &with(&v, "caps", json!({"max_tokens": -1}))).is_err());
        assert!(decide(200, &with(&v, "retry_after_ms", json!(-1))).is_err());
    }

    #[test]
    fn create_event_predicate() {
        let v = json!({"status": "APPLIED", "event_id": "ev1", "charged": amt(1)});
        common(create_event, 201, v.clone(), &["status", "event_id"]);
        assert!(
            create_event(200, &v).is_err(),
            "200 is not the event success status"
        );
        assert!(create_event(201, &with(&v, "event_id", json!(5))).is_err());
    }

    #[test]
    fn balances_predicate() {
        let v = json!({"balances": [bal()], "has_more": false});
        common(get_balances, 200, v.clone(), &["balances"]);
        assert!(get_balances(200, &with(&v, "has_more", json!("no"))).is_err());
        let neg_reserved = with(&bal(), "reserved", amt(-1));
        assert!(get_balances(200, &json!({"balances": [neg_reserved]})).is_err());
    }

    #[test]
    fn get_and_list_predicates() {
        common(
            get_reservation,
            200,
            row(),
            &[
                "reservation_id",
                "status",
                "subject",
                "action",
                "reserved",
                "created_at_ms",
                "expires_at_ms",
                "scope_path",
                "affected_scopes",
            ],
        );
        // Unknown status values are tolerated (the enum may grow).
        assert!(get_reservation(200, &with(&row(), "status", json!("ARCHIVED"))).is_ok());
        assert!(get_reservation(200, &with(&row(), "subject", json!({"dimensions": {}}))).is_err());
        let list = json!({"reservations": [row()], "next_cursor": "c", "has_more": true});
        common(list_reservations, 200, list, &["reservations"]);
        let neg = json!({"reservations": [with(&row(), "created_at_ms", json!(-1))]});
        assert!(list_reservations(200, &neg).is_err());
        assert!(get_reservation(200, &with(&row(), "created_at_ms", json!(-1))).is_ok());
    }

    /// The row as the reference server sends it: every unset subject/action member is `null`.
    fn reference_row() -> Value {
        json!({
            "reservation_id": "r1", "status": "ACTIVE", "idempotency_key": "k",
            "subject": {"tenant": "a", "workspace": null, "app": null, "workflow": null,
                        "agent": null, "toolset": null, "dimensions": null},
            "action": {"kind": "k", "name": "n", "tags": null},
            "reserved": amt(1), "created_at_ms": 1, "expires_at_ms": 2,
            "scope_path": "tenant:a", "affected_scopes": ["tenant:a"]
        })
    }

    #[test]
    fn nulls_on_optional_nested_fields_are_absent() {
        let row = reference_row();
        assert_eq!(get_reservation(200, &row), Ok(()));
        let list = json!({"reservations": [row.clone()], "next_cursor": null, "has_more": false});
        assert_eq!(list_reservations(200, &list), Ok(()));
        let bals = json!({"balances": [with(&bal(), "debt", Value::Null)], "next_cursor": null});
        assert_eq!(get_balances(200, &bals), Ok(()));
        // Tenant-less subject (`get.tenantless_subject`): tenant null, workspace set.
        let mut tl = row.clone();
        tl["subject"]["tenant"] = Value::Null;
        tl["subject"]["workspace"] = json!("shared");
        assert_eq!(get_reservation(200, &tl), Ok(()));
        // Every standard field null: the subject has no standard field.
        let mut none = row.clone();
        none["subject"]["tenant"] = Value::Null;
        assert!(get_reservation(200, &none).is_err());
        // Nulls inside nested optional objects.
        let caps = json!({"decision": "ALLOW_WITH_CAPS", "affected_scopes": [],
            "caps": {"max_tokens": null, "tool_allowlist": null, "cooldown_ms": 5}});
        assert_eq!(create_reservation(200, &caps), Ok(()));
        let ev = with(
            &row,
            "evidence",
            json!({"reserve": {"evidence_id": "e", "cycles_evidence_url": "u"}, "commit": null}),
        );
        assert_eq!(get_reservation(200, &ev), Ok(()));
        // Required nested fields stay strict.
        let mut kind_null = row.clone();
        kind_null["action"]["kind"] = Value::Null;
        assert!(get_reservation(200, &kind_null).is_err());
        let mut amount_null = row.clone();
        amount_null["reserved"]["amount"] = Value::Null;
        assert!(get_reservation(200, &amount_null).is_err());
        let null_row = json!({"reservations": [null]});
        assert!(list_reservations(200, &null_row).is_err());
        let bal_scope_null = json!({"balances": [with(&bal(), "scope", Value::Null)]});
        assert!(get_balances(200, &bal_scope_null).is_err());
        // A null where a non-null type is declared is still a type error when present.
        assert!(get_reservation(200, &with(&row, "subject", json!({"tenant": 5}))).is_err());
    }

    #[test]
    fn evidence_predicates() {
        let env = json!({
            "schema_version": "cycles-evidence/v0.1", "artifact_type": "reserve",
            "server_id": "http://x/v1", "signer_did": "ab", "issued_at_ms": 1,
            "payload": {"reserve": {}}, "evidence_id": "e", "signature": "s"
        });
        common(
            get_evidence,
            200,
            env,
            &[
                "schema_version",
                "artifact_type",
                "server_id",
                "signer_did",
                "evidence_id",
                "payload",
                "signature",
                "issued_at_ms",
            ],
        );
        let jwks = json!({"keys": [{"kty": "OKP", "crv": "Ed25519", "x": "x", "kid": "k",
                                    "cycles_nbf_ms": 0, "cycles_exp_ms": null}]});
        common(get_evidence_jwks, 200, jwks, &["keys"]);
        let bad = json!({"keys": [{"kty": "OKP", "crv": "Ed25519", "x": "x", "kid": "k"}]});
        assert!(get_evidence_jwks(200, &bad).is_err());
    }
}
