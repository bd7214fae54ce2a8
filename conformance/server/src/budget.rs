//! Budgets per (scope, unit) and the checks the spec defines on them.

use crate::config::{BudgetSeed, BudgetStatus};
use serde_json::{json, Value};

/// Ledger state of one (scope, unit). Invariant: remaining = allocated - spent - reserved - debt.
#[derive(Debug, Clone)]
pub(crate) struct Budget {
    pub scope: String,
    pub unit: String,
    pub allocated: i64,
    pub spent: i64,
    pub reserved: i64,
    pub debt: i64,
    pub overdraft_limit: i64,
    /// Set when ALLOW_IF_AVAILABLE had to cap a charge (cleared only by an operator).
    pub capped_over_limit: bool,
    pub status: BudgetStatus,
    /// Caps granted with every allowed request in this scope (`ALLOW_WITH_CAPS`).
    pub caps: Option<crate::config::CapsSeed>,
}

impl Budget {
    pub fn from_seed(s: &BudgetSeed) -> Self {
        Budget {
            scope: s.scope.clone(),
            unit: s.unit.clone(),
            allocated: s.allocated,
            spent: 0,
            reserved: 0,
            debt: 0,
            overdraft_limit: s.overdraft_limit,
            capped_over_limit: false,
            status: s.status,
            caps: s.caps.clone(),
        }
    }

    pub fn remaining(&self) -> i64 {
        self.allocated
            .saturating_sub(self.spent)
            .saturating_sub(self.reserved)
            .saturating_sub(self.debt)
    }

    /// Over-limit: debt beyond the overdraft limit, or a capped ALLOW_IF_AVAILABLE charge.
    pub fn is_over_limit(&self) -> bool {
        self.capped_over_limit || self.debt > self.overdraft_limit
    }

    /// The spec's `Balance` object.
    pub fn to_json(&self) -> Value {
        let a = |n: i64| json!({"unit": self.unit, "amount": n});
        json!({
            "scope": self.scope,
            "scope_path": self.scope,
            "remaining": a(self.remaining()),
            "reserved": a(self.reserved),
            "spent": a(self.spent),
            "allocated": a(self.allocated),
            "debt": a(self.debt),
            "overdraft_limit": a(self.overdraft_limit),
            "is_over_limit": self.is_over_limit(),
        })
    }
}

/// Why a new reservation (or decision) would be denied, in the spec's precedence:
/// budget status, then over-limit (beats debt), then debt, then insufficient remaining.
pub(crate) fn deny_reason(budgets: &[&Budget], amount: i64) -> Option<(&'static str, String)> {
    for b in budgets {
        match b.status {
            BudgetStatus::Frozen => {
                return Some((
                    "BUDGET_FROZEN",
                    format!("Budget is frozen for scope {}", b.scope),
                ))
            }
            BudgetStatus::Closed => {
                return Some((
                    "BUDGET_CLOSED",
                    format!("Budget is closed for scope {}", b.scope),
                ))
            }
            BudgetStatus::Active => {}
        }
    }
    if let Some(b) = budgets.iter().find(|b| b.is_over_limit()) {
        return Some((
            "OVERDRAFT_LIMIT_EXCEEDED",
            format!("Scope {} is over its overdraft limit", b.scope),
        ));
    }
    if let Some(b) = budgets.iter().find(|b| b.debt > 0) {
        return Some((
            "DEBT_OUTSTANDING",
            format!("Scope {} has outstanding debt", b.scope),
        ));
    }
    if let Some(b) = budgets.iter().find(|b| b.remaining() < amount) {
        return Some((
            "BUDGET_EXCEEDED",
            format!("Insufficient remaining budget for scope {}", b.scope),
        ));
    }
    None
}
