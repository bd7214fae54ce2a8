//! Shared building blocks of the wire format: units, amounts, subject, action, caps,
//! balances, metrics, evidence references and the open (forward-compatible) enums.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// Free-form JSON object used for `metadata`, `committed_metadata`, `metrics.custom`
/// and error `details`. Insertion order is preserved so that a request built twice from
/// the same code serializes to identical bytes (servers may compare idempotent replays
/// byte-for-byte, order-sensitively).
pub type Metadata = serde_json::Map<String, serde_json::Value>;

/// Defines a string enum whose unknown values are kept verbatim in an `Other(String)`
/// variant. The spec evolves additively (new units, statuses, decisions), so a value we
/// do not know yet must survive decoding and re-encoding unchanged instead of failing.
macro_rules! open_string_enum {
    (
        $(#[doc = $doc:literal])*
        $name:ident { $( $(#[doc = $vdoc:literal])* $variant:ident => $wire:literal ),+ $(,)? }
    ) => {
        $(#[doc = $doc])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[doc = $vdoc])* $variant, )+
            /// A value this version of the client does not know; carried through unchanged.
            Other(String),
        }

        impl $name {
            /// The exact wire string of this value.
            pub fn as_str(&self) -> &str {
                match self {
                    $( $name::$variant => $wire, )+
                    $name::Other(s) => s.as_str(),
                }
            }

            /// True when the value is one this client version knows (not `Other`).
            pub fn is_known(&self) -> bool {
                !matches!(self, $name::Other(_))
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                match s {
                    $( $wire => $name::$variant, )+
                    other => $name::Other(other.to_string()),
                }
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                match s.as_str() {
                    $( $wire => $name::$variant, )+
                    _ => $name::Other(s),
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let s = <String as ::serde::Deserialize>::deserialize(deserializer)?;
                Ok($name::from(s))
            }
        }

        // An open enum is a string on the wire; the generator reads the known values (with
        // their docs) from `x-open-enum` to write each host's constants.
        #[cfg(feature = "schema")]
        impl ::schemars::JsonSchema for $name {
            fn schema_name() -> ::std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            fn json_schema(_: &mut ::schemars::SchemaGenerator) -> ::schemars::Schema {
                ::schemars::json_schema!({
                    "type": "string",
                    "description": concat!($($doc, "\n"),*),
                    "x-open-enum": [ $( {"value": $wire, "description": concat!($($vdoc, "\n"),*)} ),+ ]
                })
            }
        }
    };
}
pub(crate) use open_string_enum;

open_string_enum! {
    /// Budget unit (`UnitEnum`). Unknown future units round-trip unchanged via `Other`.
    Unit {
        /// 10^-6 cents (10^8 per USD).
        UsdMicrocents => "USD_MICROCENTS",
        /// Integer token counts.
        Tokens => "TOKENS",
        /// Generic integer credits.
        Credits => "CREDITS",
        /// Generic integer risk points.
        RiskPoints => "RISK_POINTS",
    }
}

open_string_enum! {
    /// Outcome of a decision or reservation (`DecisionEnum`).
    Decision {
        /// Sufficient budget.
        Allow => "ALLOW",
        /// Budget exists but soft constraints (`caps`) apply.
        AllowWithCaps => "ALLOW_WITH_CAPS",
        /// Denied; see `reason_code`.
        Deny => "DENY",
    }
}

open_string_enum! {
    /// Reservation lifecycle state. The spec says v1+ may add terminal states, so unknown
    /// values are tolerated.
    ReservationStatus {
        /// Live; may be committed, released or extended.
        Active => "ACTIVE",
        /// Settled by commit.
        Committed => "COMMITTED",
        /// Returned by release.
        Released => "RELEASED",
        /// Expired without settlement.
        Expired => "EXPIRED",
    }
}

open_string_enum! {
    /// Status of a created event (`EventCreateResponse.status`).
    EventStatus {
        /// The event was applied atomically across all derived scopes.
        Applied => "APPLIED",
    }
}

open_string_enum! {
    /// How the server handles actual > reserved (`CommitOveragePolicy`).
    OveragePolicy {
        /// Reject the overage.
        Reject => "REJECT",
        /// Charge what is available, never create debt (server default).
        AllowIfAvailable => "ALLOW_IF_AVAILABLE",
        /// Allow debt up to the scope's overdraft limit.
        AllowWithOverdraft => "ALLOW_WITH_OVERDRAFT",
    }
}

/// Non-negative integer amount in a unit (`Amount`). The amount is int64 on the wire;
/// the `minimum: 0` rule is checked by the success predicates, not by decoding.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Amount {
    /// Unit of the amount.
    pub unit: Unit,
    /// Integer amount (int64).
    pub amount: i64,
}

impl Amount {
    /// Builds an amount.
    pub fn new(unit: Unit, amount: i64) -> Self {
        Amount { unit, amount }
    }
}

/// Like [`Amount`] but may be negative (`SignedAmount`, e.g. `Balance.remaining` in overdraft).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SignedAmount {
    /// Unit of the amount.
    pub unit: Unit,
    /// Signed integer amount (int64).
    pub amount: i64,
}

impl SignedAmount {
    /// Builds a signed amount.
    pub fn new(unit: Unit, amount: i64) -> Self {
        SignedAmount { unit, amount }
    }
}

/// Hierarchical budget subject (`Subject`). At least one standard field must be set; a
/// subject with only `dimensions` is rejected by the server with 400.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Subject {
    /// Tenant (must equal the effective tenant of the API key when set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// Workspace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// Application.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<String>,
    /// Workflow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    /// Agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Toolset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toolset: Option<String>,
    /// Custom dimensions (opaque string values). A sorted map keeps serialization stable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dimensions: Option<BTreeMap<String, String>>,
}

impl Subject {
    /// A subject with only the tenant set.
    pub fn tenant(tenant: impl Into<String>) -> Self {
        Subject {
            tenant: Some(tenant.into()),
            ..Subject::default()
        }
    }

    /// Sets the workspace.
    pub fn with_workspace(mut self, v: impl Into<String>) -> Self {
        self.workspace = Some(v.into());
        self
    }

    /// Sets the app.
    pub fn with_app(mut self, v: impl Into<String>) -> Self {
        self.app = Some(v.into());
        self
    }

    /// Sets the workflow.
    pub fn with_workflow(mut self, v: impl Into<String>) -> Self {
        self.workflow = Some(v.into());
        self
    }

    /// Sets the agent.
    pub fn with_agent(mut self, v: impl Into<String>) -> Self {
        self.agent = Some(v.into());
        self
    }

    /// Sets the toolset.
    pub fn with_toolset(mut self, v: impl Into<String>) -> Self {
        self.toolset = Some(v.into());
        self
    }

    /// Adds one custom dimension.
    pub fn with_dimension(mut self, k: impl Into<String>, v: impl Into<String>) -> Self {
        self.dimensions
            .get_or_insert_with(BTreeMap::new)
            .insert(k.into(), v.into());
        self
    }
}

/// The guarded action (`Action`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Action {
    /// Action type, e.g. `llm.completion`.
    pub kind: String,
    /// Provider/model/tool identifier, e.g. `openai:gpt-4o-mini`.
    pub name: String,
    /// Optional policy tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<String>>,
}

impl Action {
    /// Builds an action without tags.
    pub fn new(kind: impl Into<String>, name: impl Into<String>) -> Self {
        Action {
            kind: kind.into(),
            name: name.into(),
            tags: None,
        }
    }
}

/// Soft-landing constraints returned with `ALLOW_WITH_CAPS` (`Caps`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Caps {
    /// Maximum tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<i64>,
    /// Maximum remaining steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_steps_remaining: Option<i64>,
    /// If non-empty, only these tools are allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_allowlist: Option<Vec<String>>,
    /// Tools not allowed (ignored when the allowlist is non-empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_denylist: Option<Vec<String>>,
    /// Cooldown in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cooldown_ms: Option<i64>,
}

/// Standard metrics for commit and event (`StandardMetrics`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StandardMetrics {
    /// Input tokens consumed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_input: Option<i64>,
    /// Output tokens generated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_output: Option<i64>,
    /// Total latency in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<i64>,
    /// Actual model/tool version used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_version: Option<String>,
    /// Arbitrary additional metrics (the only place for custom fields; the schema is closed),
    /// sent exactly as given (see [`JsonObject`](super::JsonObject)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom: Option<super::JsonObject>,
}

/// Ledger state of one (scope, unit) pair (`Balance`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Balance {
    /// Canonical scope identifier.
    pub scope: String,
    /// Canonical hierarchical path.
    pub scope_path: String,
    /// Available budget; negative in overdraft.
    pub remaining: SignedAmount,
    /// Locked by active reservations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserved: Option<Amount>,
    /// Committed so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spent: Option<Amount>,
    /// Overdraft debt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub debt: Option<Amount>,
    /// Total allocation, if fixed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocated: Option<Amount>,
    /// Maximum debt allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overdraft_limit: Option<Amount>,
    /// True when the scope is over its limit (absent means false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_over_limit: Option<bool>,
}

/// Reference to a signed CyclesEvidence envelope (`CyclesEvidenceRef`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct EvidenceRef {
    /// sha256 content id of the envelope (64 lowercase hex).
    pub evidence_id: String,
    /// Absolute URL of the envelope.
    pub cycles_evidence_url: String,
}

/// Evidence references of one reservation keyed by artifact type (`ReservationEvidence`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ReservationEvidence {
    /// Evidence of the reserve operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserve: Option<EvidenceRef>,
    /// Evidence of the commit (COMMITTED reservations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<EvidenceRef>,
    /// Evidence of the release (RELEASED reservations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<EvidenceRef>,
}

/// Machine-readable reason of a DENY (`DecisionReasonCode`). The spec makes this an OPEN
/// string: clients MUST NOT reject unknown values, so it is a newtype with known constants
/// rather than an enum.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ReasonCode(pub String);

/// The known reason codes, written once: each becomes a constant, a member of
/// [`ReasonCode::KNOWN`] and, for the host-model generator, a documented value.
macro_rules! reason_codes {
    ($( $(#[doc = $doc:literal])* $name:ident, )+) => {
        impl ReasonCode {
            $( $(#[doc = $doc])* pub const $name: &'static str = stringify!($name); )+

            /// Every code this version knows.
            pub const KNOWN: &'static [&'static str] = &[$(stringify!($name)),+];
        }

        #[cfg(feature = "schema")]
        impl schemars::JsonSchema for ReasonCode {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                "ReasonCode".into()
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({
                    "type": "string",
                    "description": "Machine-readable reason of a DENY (`DecisionReasonCode`).",
                    "x-open-enum": [ $( {"value": stringify!($name), "description": concat!($($doc, "\n"),*)} ),+ ]
                })
            }
        }
    };
}

reason_codes! {
    /// Remaining amount insufficient on at least one derived scope.
    BUDGET_EXCEEDED,
    /// A derived scope's budget is FROZEN.
    BUDGET_FROZEN,
    /// A derived scope's budget is CLOSED.
    BUDGET_CLOSED,
    /// No budget at any derived scope in the requested unit.
    BUDGET_NOT_FOUND,
    /// Overdraft limit exceeded or the scope is over limit.
    OVERDRAFT_LIMIT_EXCEEDED,
    /// Debt outstanding and no overdraft permitted.
    DEBT_OUTSTANDING,
    /// The owning tenant is CLOSED.
    TENANT_CLOSED,
    /// v0.1.26 extension: action quota exceeded.
    ACTION_QUOTA_EXCEEDED,
    /// v0.1.26 extension: action kind denied.
    ACTION_KIND_DENIED,
    /// v0.1.26 extension: action kind not in the allowlist.
    ACTION_KIND_NOT_ALLOWED,
}

impl ReasonCode {
    /// The wire string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// True when the code is one of [`ReasonCode::KNOWN`].
    pub fn is_known(&self) -> bool {
        Self::KNOWN.contains(&self.0.as_str())
    }
}

impl PartialEq<&str> for ReasonCode {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl fmt::Display for ReasonCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_unit_round_trips_unchanged() {
        let a: Amount =
            serde_json::from_value(json!({"unit": "GPU_SECONDS", "amount": 7})).unwrap();
        assert_eq!(a.unit, Unit::Other("GPU_SECONDS".into()));
        assert!(!a.unit.is_known());
        assert_eq!(
            serde_json::to_value(&a).unwrap(),
            json!({"unit": "GPU_SECONDS", "amount": 7})
        );
    }

    #[test]
    fn known_units_map_to_variants() {
        for (s, u) in [
            ("USD_MICROCENTS", Unit::UsdMicrocents),
            ("TOKENS", Unit::Tokens),
            ("CREDITS", Unit::Credits),
            ("RISK_POINTS", Unit::RiskPoints),
        ] {
            assert_eq!(Unit::from(s), u);
            assert_eq!(serde_json::to_value(&u).unwrap(), json!(s));
        }
        // Case matters on the wire: a lowercase unit is a different (unknown) unit.
        assert_eq!(Unit::from("tokens"), Unit::Other("tokens".into()));
    }

    #[test]
    fn unknown_status_and_decision_tolerated() {
        let s: ReservationStatus = serde_json::from_value(json!("ARCHIVED")).unwrap();
        assert_eq!(s, ReservationStatus::Other("ARCHIVED".into()));
        assert_eq!(serde_json::to_value(&s).unwrap(), json!("ARCHIVED"));
        let d: Decision = serde_json::from_value(json!("MAYBE")).unwrap();
        assert_eq!(d.as_str(), "MAYBE");
    }

    #[test]
    fn reason_code_is_open() {
        let r: ReasonCode = serde_json::from_value(json!("SOMETHING_NEW")).unwrap();
        assert!(!r.is_known());
        let r: ReasonCode = serde_json::from_value(json!("BUDGET_EXCEEDED")).unwrap();
        assert!(r.is_known());
        assert_eq!(r, ReasonCode::BUDGET_EXCEEDED);
    }

    #[test]
    fn subject_skips_none_and_keeps_dimensions() {
        let s = Subject::tenant("acme")
            .with_agent("bot")
            .with_dimension("cost_center", "42");
        assert_eq!(
            serde_json::to_value(&s).unwrap(),
            json!({"tenant": "acme", "agent": "bot", "dimensions": {"cost_center": "42"}})
        );
        let back: Subject = serde_json::from_value(
            json!({"tenant": "acme", "agent": "bot", "dimensions": {"cost_center": "42"}, "future": 1}),
        )
        .unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn balance_tolerates_unknown_fields() {
        let b: Balance = serde_json::from_value(json!({
            "scope": "tenant:a", "scope_path": "tenant:a",
            "remaining": {"unit": "TOKENS", "amount": -5},
            "new_field": {"x": 1}
        }))
        .unwrap();
        assert_eq!(b.remaining.amount, -5);
        assert_eq!(b.is_over_limit, None);
    }
}
