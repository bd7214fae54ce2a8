//! The in-memory world: budgets, reservations, idempotency records, evidence and the ledger.
//! Everything lives behind one mutex so each operation is atomic across scopes.

use crate::budget::Budget;
use crate::config::ServerConfig;
use crate::error::ApiError;
use crate::records::LedgerEntry;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Reservation lifecycle state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    Active,
    Committed,
    Released,
    Expired,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Active => "ACTIVE",
            Status::Committed => "COMMITTED",
            Status::Released => "RELEASED",
            Status::Expired => "EXPIRED",
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Reservation {
    pub id: String,
    /// Creation order, the default list order.
    pub seq: u64,
    pub tenant: String,
    pub subject: Value,
    pub action: Value,
    pub unit: String,
    pub amount: i64,
    pub created_at_ms: i64,
    pub expires_at_ms: i64,
    pub grace_ms: i64,
    pub overage_policy: String,
    pub status: Status,
    pub idempotency_key: String,
    pub scope_path: String,
    pub affected_scopes: Vec<String>,
    /// Budget keys (scope, unit) this reservation holds amounts on.
    pub budget_keys: Vec<(String, String)>,
    pub committed: Option<i64>,
    pub finalized_at_ms: Option<i64>,
    pub metadata: Option<Value>,
    pub committed_metadata: Option<Value>,
    pub evidence: BTreeMap<&'static str, Value>,
    pub extensions: u32,
}

impl Reservation {
    /// ReservationDetail / ReservationSummary JSON; `full` adds the heavy optional maps.
    pub fn to_json(&self, metadata: bool, committed_metadata: bool, evidence: bool) -> Value {
        let mut v = json!({
            "reservation_id": self.id,
            "status": self.status.as_str(),
            "idempotency_key": self.idempotency_key,
            "subject": self.subject,
            "action": self.action,
            "reserved": {"unit": self.unit, "amount": self.amount},
            "created_at_ms": self.created_at_ms,
            "expires_at_ms": self.expires_at_ms,
            "scope_path": self.scope_path,
            "affected_scopes": self.affected_scopes,
        });
        if let Some(c) = self.committed {
            v["committed"] = json!({"unit": self.unit, "amount": c});
        }
        if let Some(f) = self.finalized_at_ms {
            v["finalized_at_ms"] = json!(f);
        }
        if metadata {
            if let Some(m) = &self.metadata {
                v["metadata"] = m.clone();
            }
        }
        if committed_metadata {
            if let Some(m) = &self.committed_metadata {
                v["committed_metadata"] = m.clone();
            }
        }
        if evidence && !self.evidence.is_empty() {
            v["evidence"] = json!(self.evidence);
        }
        v
    }
}

/// A stored successful response for idempotent replay.
#[derive(Debug, Clone)]
pub(crate) struct IdemRecord {
    pub fingerprint: String,
    pub status: u16,
    /// The reply as compact JSON text: kept for every write for ever, and a `Value` tree
    /// (index maps, boxed strings) takes several times the text's size.
    pub body: String,
    pub reservation_id: Option<String>,
}

/// Tenant record (status is what the closed-tenant guard observes).
#[derive(Debug, Clone, Default)]
pub(crate) struct Tenant {
    pub closed: bool,
}

#[derive(Debug, Default)]
pub(crate) struct State {
    pub budgets: BTreeMap<(String, String), Budget>,
    pub reservations: HashMap<String, Reservation>,
    /// Expiry index: (expires_at_ms + grace, id) for every deadline ever set, so the lazy
    /// sweep touches only reservations that are due instead of scanning all of them.
    /// Entries go stale when a reservation is extended or finalized; the sweep skips them.
    pub deadlines: BTreeSet<(i64, String)>,
    pub next_reservation_seq: u64,
    pub idempotency: HashMap<(String, String, String), IdemRecord>,
    /// Evidence envelopes by id, as compact JSON text (see `IdemRecord::body`).
    pub evidence: HashMap<String, String>,
    pub tenants: HashMap<String, Tenant>,
    /// API key -> tenant id.
    pub api_keys: HashMap<String, String>,
    pub ledger: Vec<LedgerEntry>,
}

impl State {
    pub fn from_config(c: &ServerConfig) -> Self {
        let mut s = State::default();
        for t in &c.tenants {
            s.tenants.insert(t.id.clone(), Tenant { closed: t.closed });
            for k in &t.api_keys {
                s.api_keys.insert(k.clone(), t.id.clone());
            }
        }
        for b in &c.budgets {
            s.budgets
                .insert((b.scope.clone(), b.unit.clone()), Budget::from_seed(b));
        }
        s
    }

    pub fn tenant_closed(&self, tenant: &str) -> bool {
        self.tenants.get(tenant).map(|t| t.closed).unwrap_or(false)
    }

    /// Adds a reservation with its current deadline: call on insert and after every extend.
    pub fn track_deadline(&mut self, id: &str) {
        if let Some(r) = self.reservations.get(id) {
            self.deadlines
                .insert((r.expires_at_ms.saturating_add(r.grace_ms), id.to_string()));
        }
    }

    /// Lazy expiry: ACTIVE reservations past expiry + grace become EXPIRED and free their amount.
    pub fn sweep(&mut self, now: i64) {
        let mut freed = Vec::new();
        while let Some((deadline, id)) = self.deadlines.first().cloned() {
            if deadline >= now {
                break;
            }
            self.deadlines.pop_first();
            let Some(r) = self.reservations.get_mut(&id) else {
                continue;
            };
            // A stale entry (extended since, or finalized) is simply dropped.
            if r.status == Status::Active && now > r.expires_at_ms.saturating_add(r.grace_ms) {
                r.status = Status::Expired;
                freed.push((r.budget_keys.clone(), r.amount));
            }
        }
        for (keys, amount) in freed {
            for k in keys {
                if let Some(b) = self.budgets.get_mut(&k) {
                    b.reserved -= amount;
                }
            }
        }
    }

    /// Budget keys in canonical order for the derived scopes in `unit`:
    /// 404 when no derived scope has any budget, 400 UNIT_MISMATCH when only other units exist.
    pub fn resolve(
        &self,
        scopes: &[String],
        unit: &str,
    ) -> Result<Vec<(String, String)>, ApiError> {
        let keys: Vec<(String, String)> = scopes
            .iter()
            .map(|s| (s.clone(), unit.to_string()))
            .filter(|k| self.budgets.contains_key(k))
            .collect();
        if !keys.is_empty() {
            return Ok(keys);
        }
        for s in scopes {
            let units: Vec<String> = self
                .budgets
                .keys()
                .filter(|(bs, _)| bs == s)
                .map(|(_, u)| u.clone())
                .collect();
            if !units.is_empty() {
                return Err(ApiError::new(
                    400,
                    "UNIT_MISMATCH",
                    format!("Unit {unit} does not match the budget units of scope {s}"),
                )
                .with_details(
                    json!({"scope": s, "requested_unit": unit, "expected_units": units}),
                ));
            }
        }
        Err(ApiError::not_found(format!(
            "Budget not found for provided scope: {}",
            scopes.last().cloned().unwrap_or_default()
        )))
    }

    pub fn budgets_of(&self, keys: &[(String, String)]) -> Vec<&Budget> {
        keys.iter().filter_map(|k| self.budgets.get(k)).collect()
    }

    /// The caps the innermost budget of `keys` that has any grants (`ALLOW_WITH_CAPS`).
    pub fn caps_json(&self, keys: &[(String, String)]) -> Option<Value> {
        self.budgets_of(keys)
            .into_iter()
            .rev()
            .find_map(|b| b.caps.as_ref())
            .and_then(|c| serde_json::to_value(c).ok())
    }

    pub fn balances_json(&self, keys: &[(String, String)]) -> Value {
        Value::Array(self.budgets_of(keys).iter().map(|b| b.to_json()).collect())
    }

    /// Charge `base` (already covered, e.g. the reservation's own amount) plus `delta` beyond it,
    /// following the overage policy. `reserved_release` is removed from `reserved` first.
    /// Returns the amount charged.
    pub fn settle(
        &mut self,
        keys: &[(String, String)],
        reserved_release: i64,
        base: i64,
        delta: i64,
        policy: &str,
    ) -> Result<(i64, bool), ApiError> {
        // Availability for the delta is evaluated with this reservation's hold already released
        // and its base charged, i.e. against the plain `remaining`.
        let remaining: Vec<i64> = self
            .budgets_of(keys)
            .iter()
            .map(|b| b.remaining())
            .collect();
        let covered = remaining.iter().all(|r| *r >= delta);
        // Balance schema: "If overdraft_limit is absent or amount=0, no overdraft is permitted
        // (behaves as ALLOW_IF_AVAILABLE)" -- so with no overdraft anywhere it is needed, cap.
        let no_overdraft = keys
            .iter()
            .zip(&remaining)
            .filter(|(_, r)| **r < delta)
            .all(|(k, _)| self.budgets[k].overdraft_limit == 0);
        let policy = if policy == "ALLOW_WITH_OVERDRAFT" && no_overdraft {
            "ALLOW_IF_AVAILABLE"
        } else {
            policy
        };
        let mut charged = base + delta;
        let mut capped = false;
        match policy {
            _ if covered || delta == 0 => {
                for k in keys {
                    let b = self.budgets.get_mut(k).expect("resolved budget");
                    b.reserved -= reserved_release;
                    b.spent += base + delta;
                }
            }
            "REJECT" => {
                let scope = keys
                    .iter()
                    .zip(&remaining)
                    .find(|(_, r)| **r < delta)
                    .map(|(k, _)| k.0.clone());
                return Err(ApiError::conflict(
                    "BUDGET_EXCEEDED",
                    format!(
                        "Insufficient remaining budget for scope {}",
                        scope.unwrap_or_default()
                    ),
                ));
            }
            "ALLOW_WITH_OVERDRAFT" => {
                for (k, r) in keys.iter().zip(&remaining) {
                    let b = &self.budgets[k];
                    if *r < delta && b.debt.saturating_add(delta) > b.overdraft_limit {
                        return Err(ApiError::conflict(
                            "OVERDRAFT_LIMIT_EXCEEDED",
                            format!(
                                "Debt plus overage would exceed the overdraft limit of scope {}",
                                k.0
                            ),
                        ));
                    }
                }
                for (k, r) in keys.iter().zip(&remaining) {
                    let b = self.budgets.get_mut(k).expect("resolved budget");
                    b.reserved -= reserved_release;
                    if *r >= delta {
                        b.spent += base + delta;
                    } else {
                        // Spec prose: "add delta to debt, remaining can go negative".
                        b.spent += base;
                        b.debt += delta;
                    }
                }
            }
            _ => {
                // ALLOW_IF_AVAILABLE: cap the delta to the minimum available, never debt.
                let avail = remaining
                    .iter()
                    .map(|r| (*r).max(0))
                    .min()
                    .unwrap_or(0)
                    .min(delta);
                charged = base + avail;
                capped = true;
                for (k, r) in keys.iter().zip(&remaining) {
                    let b = self.budgets.get_mut(k).expect("resolved budget");
                    b.reserved -= reserved_release;
                    b.spent += base + avail;
                    if *r < delta {
                        b.capped_over_limit = true;
                    }
                }
            }
        }
        Ok((charged, capped))
    }

    #[allow(clippy::too_many_arguments)]
    pub fn record(
        &mut self,
        kind: &str,
        tenant: &str,
        reservation_id: Option<&str>,
        key: &str,
        unit: Option<&str>,
        amount: Option<i64>,
        now: i64,
    ) {
        let seq = self.ledger.len() as u64 + 1;
        self.ledger.push(LedgerEntry {
            seq,
            kind: kind.to_string(),
            tenant: tenant.to_string(),
            reservation_id: reservation_id.map(str::to_string),
            idempotency_key: key.to_string(),
            unit: unit.map(str::to_string),
            amount,
            applied_at_ms: now,
        });
    }
}
