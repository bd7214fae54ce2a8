//! Server configuration. Everything derives serde with `#[serde(default)]` so a JSON file
//! with only the interesting fields is a valid config (the CLI loads configs that way), and
//! `deny_unknown_fields`, so a misspelt key (`"budget"` for `"budgets"`) is an error naming it
//! instead of a server silently started with the defaults.

use serde::{Deserialize, Serialize};
use std::net::SocketAddr;

/// Full configuration of a [`crate::LocalServer`].
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Address to bind; port 0 picks a free port.
    pub bind: SocketAddr,
    /// Tenants and their API keys.
    pub tenants: Vec<TenantSeed>,
    /// Key accepted in `X-Admin-API-Key` on list/get/release; `None` disables admin auth.
    pub admin_api_key: Option<String>,
    /// Budgets per (scope, unit).
    pub budgets: Vec<BudgetSeed>,
    /// TTL/extension regime.
    pub regime: Regime,
    /// How idempotency payloads are compared.
    pub idempotency_compare: IdempotencyCompare,
    /// Emit `cycles_evidence` refs and serve signed envelopes plus the JWKS.
    pub evidence: bool,
    /// Wire dialect: spec-faithful (default) or like the reference server.
    pub mode: ServerMode,
}

/// How responses are serialised. Serde: `"spec"` (default) or `"reference"`.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum ServerMode {
    /// Exactly what the spec declares (what the fidelity check verifies).
    #[default]
    #[serde(alias = "Spec")]
    Spec,
    /// Like the reference server (runcycles/cycles-server 0.1.25.59) wherever a client can
    /// see it: explicit nulls for unset subject/action members and last-page cursors, 500 on
    /// routing errors, 401 reason codes, its header quirks (conformance/server/README.md).
    #[serde(alias = "Reference")]
    Reference,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            tenants: vec![TenantSeed::default()],
            admin_api_key: Some("cycles-local-admin".to_string()),
            budgets: vec![BudgetSeed::default()],
            regime: Regime::default(),
            idempotency_compare: IdempotencyCompare::Exact,
            evidence: true,
            mode: ServerMode::Spec,
        }
    }
}

/// One tenant and the API keys that authenticate as it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct TenantSeed {
    /// Tenant id (the `tenant` subject value).
    pub id: String,
    /// Keys accepted in `X-Cycles-API-Key`.
    pub api_keys: Vec<String>,
    /// Start CLOSED (persisting ops get 409 TENANT_CLOSED).
    pub closed: bool,
}

impl Default for TenantSeed {
    fn default() -> Self {
        TenantSeed {
            id: "acme".into(),
            api_keys: vec!["cycles-local-key".into()],
            closed: false,
        }
    }
}

/// Operator-set budget status.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum BudgetStatus {
    /// Normal operation.
    #[default]
    #[serde(alias = "Active", alias = "active")]
    Active,
    /// No new reservations (409 BUDGET_FROZEN).
    #[serde(alias = "Frozen", alias = "frozen")]
    Frozen,
    /// Permanently closed (409 BUDGET_CLOSED).
    #[serde(alias = "Closed", alias = "closed")]
    Closed,
}

/// A budget for one (scope, unit).
/// `scope`, `unit` and `allocated` are required in JSON: a budget missing one would otherwise
/// be the default's (`tenant:acme`, `USD_MICROCENTS`, 10^10), and the next call would fail
/// far from the mistake.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct BudgetSeed {
    /// Canonical scope, e.g. `tenant:acme/workspace:prod`.
    pub scope: String,
    /// Unit name (`USD_MICROCENTS`, `TOKENS`, `CREDITS`, `RISK_POINTS`).
    pub unit: String,
    /// Allocated amount.
    pub allocated: i64,
    /// Maximum debt ALLOW_WITH_OVERDRAFT may accrue.
    #[serde(default)]
    pub overdraft_limit: i64,
    /// Operator status.
    #[serde(default)]
    pub status: BudgetStatus,
    /// Caps granted with every allowed reservation and decision in this scope: the answer is
    /// then `ALLOW_WITH_CAPS` with these caps (`None`: plain `ALLOW`). The innermost scope's
    /// caps win when several budgets of a request have them.
    #[serde(default)]
    pub caps: Option<CapsSeed>,
}

/// The spec's `Caps` object a budget grants (every member optional).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct CapsSeed {
    /// Maximum tokens the work should request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<i64>,
    /// Maximum remaining agent steps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_steps_remaining: Option<i64>,
    /// Only these tools are allowed (when non-empty).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_allowlist: Option<Vec<String>>,
    /// These tools are not allowed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_denylist: Option<Vec<String>>,
    /// Cooldown before the next action, in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cooldown_ms: Option<i64>,
}

impl Default for BudgetSeed {
    fn default() -> Self {
        BudgetSeed {
            scope: "tenant:acme".into(),
            unit: "USD_MICROCENTS".into(),
            allocated: 10_000_000_000,
            overdraft_limit: 0,
            status: BudgetStatus::Active,
            caps: None,
        }
    }
}

/// TTL and extension behaviour, to emulate the server regimes the heartbeat spec describes.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct Regime {
    /// Emit `remaining_ttl_ms` on live create/extend successes.
    pub emit_remaining_ttl: bool,
    /// How `extend_by_ms` turns into a new expiry.
    pub extend: ExtendClamp,
    /// Cap on the TTL granted at create.
    pub initial_ttl_cap_ms: Option<u64>,
    /// Extensions allowed per reservation (`None` = unlimited).
    pub max_extensions: Option<u32>,
}

impl Default for Regime {
    fn default() -> Self {
        Regime {
            emit_remaining_ttl: true,
            extend: ExtendClamp::Additive,
            initial_ttl_cap_ms: None,
            max_extensions: Some(10),
        }
    }
}

/// Extension clamp regime. Serde: `{"kind": "additive"}`, `{"kind": "grant_cap", "max_grant_ms": N}`,
/// `{"kind": "max_lead", "max_lead_ms": N}` (PascalCase kinds accepted too).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ExtendClamp {
    /// new = expires + extend_by.
    #[default]
    #[serde(alias = "Additive")]
    Additive,
    /// new = expires + min(extend_by, max_grant_ms).
    #[serde(alias = "GrantCap")]
    GrantCap {
        /// Largest grant per extension.
        max_grant_ms: u64,
    },
    /// new = min(expires + extend_by, now + max_lead_ms), never earlier than the current expiry.
    #[serde(alias = "MaxLead")]
    MaxLead {
        /// Largest lead (expiry - now) an extension may establish.
        max_lead_ms: u64,
    },
}

/// How a same-key request's payload is compared with the stored one.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum IdempotencyCompare {
    /// The body's JSON as sent (whitespace-insensitive, key order significant), like the reference server.
    #[default]
    #[serde(alias = "Exact")]
    Exact,
    /// Canonical JSON (sorted keys), as the spec recommends.
    #[serde(alias = "Canonical")]
    Canonical,
}
