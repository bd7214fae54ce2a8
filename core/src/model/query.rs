//! Query-string operations: `getBalances` and `listReservations`, with a pure pagination
//! helper that follows `next_cursor`.

use serde::{Deserialize, Serialize};

use super::common::{open_string_enum, Balance, ReservationStatus};
use super::reservation::ReservationListResponse;

/// Query of `GET /v1/balances`. At least one subject filter is required by the server.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct BalanceQuery {
    /// Tenant (validation-only; must match the effective tenant).
    pub tenant: Option<String>,
    /// Workspace filter.
    pub workspace: Option<String>,
    /// App filter.
    pub app: Option<String>,
    /// Workflow filter.
    pub workflow: Option<String>,
    /// Agent filter.
    pub agent: Option<String>,
    /// Toolset filter.
    pub toolset: Option<String>,
    /// Include child scopes (servers MAY ignore).
    pub include_children: Option<bool>,
    /// Page size (1..=200).
    pub limit: Option<u32>,
    /// Opaque cursor from a previous page.
    pub cursor: Option<String>,
}

impl BalanceQuery {
    /// A query for one tenant.
    pub fn tenant(tenant: impl Into<String>) -> Self {
        BalanceQuery {
            tenant: Some(tenant.into()),
            ..BalanceQuery::default()
        }
    }

    /// The query parameters in a stable order; unset values are omitted.
    pub fn to_pairs(&self) -> Vec<(&'static str, String)> {
        let mut p = Vec::new();
        push(&mut p, "tenant", &self.tenant);
        push(&mut p, "workspace", &self.workspace);
        push(&mut p, "app", &self.app);
        push(&mut p, "workflow", &self.workflow);
        push(&mut p, "agent", &self.agent);
        push(&mut p, "toolset", &self.toolset);
        if let Some(b) = self.include_children {
            p.push(("include_children", b.to_string()));
        }
        if let Some(l) = self.limit {
            p.push(("limit", l.to_string()));
        }
        push(&mut p, "cursor", &self.cursor);
        p
    }
}

/// Success body of `getBalances` (`BalanceResponse`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct BalanceResponse {
    /// Balances of the matching scopes.
    pub balances: Vec<Balance>,
    /// Cursor of the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// True if more results may be available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub has_more: Option<bool>,
}

open_string_enum! {
    /// `sort_by` of `listReservations`. Servers ignore keys they do not know.
    SortBy {
        /// By reservation id.
        ReservationId => "reservation_id",
        /// By subject tenant.
        Tenant => "tenant",
        /// By canonical scope path.
        ScopePath => "scope_path",
        /// By status.
        Status => "status",
        /// By reserved amount.
        Reserved => "reserved",
        /// By creation time.
        CreatedAtMs => "created_at_ms",
        /// By expiry.
        ExpiresAtMs => "expires_at_ms",
    }
}

open_string_enum! {
    /// Sort direction (`SortDirection`); servers default to `desc`.
    SortDir {
        /// Ascending.
        Asc => "asc",
        /// Descending.
        Desc => "desc",
    }
}

open_string_enum! {
    /// A token of `listReservations`' `include`, the spec's field projection: which optional
    /// heavy members each row of the page carries (by default none; `committed` is always
    /// there). Servers ignore tokens they do not know.
    ListInclude {
        /// `metadata`: the reservation's RESERVE-time metadata, on rows that carry it.
        Metadata => "metadata",
        /// `committed_metadata`: the COMMIT-time metadata, on committed rows whose commit
        /// carried it.
        CommittedMetadata => "committed_metadata",
        /// `evidence`: the evidence references of the reservation's reserve, commit and
        /// release, on rows that have recorded evidence.
        Evidence => "evidence",
    }
}

/// Query of `GET /v1/reservations` with every filter of the spec.
///
/// Window bounds (`from`/`to` on `created_at_ms`, `expires_from`/`expires_to`,
/// `finalized_from`/`finalized_to`) are ISO 8601 date-time strings passed through as given;
/// blank strings are omitted because the spec treats them as unset anyway.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema), schemars(default))]
pub struct ListReservationsQuery {
    /// Recover a reservation by its creation idempotency key.
    pub idempotency_key: Option<String>,
    /// Filter by status.
    pub status: Option<ReservationStatus>,
    /// Tenant (validation-only under an API key).
    pub tenant: Option<String>,
    /// Workspace filter.
    pub workspace: Option<String>,
    /// App filter.
    pub app: Option<String>,
    /// Workflow filter.
    pub workflow: Option<String>,
    /// Agent filter.
    pub agent: Option<String>,
    /// Toolset filter.
    pub toolset: Option<String>,
    /// Created at or after (ISO 8601).
    pub from: Option<String>,
    /// Created at or before (ISO 8601).
    pub to: Option<String>,
    /// Expires at or after (ISO 8601).
    pub expires_from: Option<String>,
    /// Expires at or before (ISO 8601).
    pub expires_to: Option<String>,
    /// Finalized at or after (ISO 8601); excludes rows never finalized.
    pub finalized_from: Option<String>,
    /// Finalized at or before (ISO 8601); excludes rows never finalized.
    pub finalized_to: Option<String>,
    /// Sort key.
    pub sort_by: Option<SortBy>,
    /// Sort direction.
    pub sort_dir: Option<SortDir>,
    /// Projection tokens ([`ListInclude`]: `metadata`, `committed_metadata`, `evidence`),
    /// sent comma-joined.
    #[cfg_attr(feature = "schema", schemars(with = "Vec<ListInclude>"))]
    pub include: Vec<String>,
    /// Page size (1..=200).
    pub limit: Option<u32>,
    /// Opaque cursor from a previous page.
    pub cursor: Option<String>,
}

impl ListReservationsQuery {
    /// The query parameters in a stable order; unset and blank values are omitted.
    pub fn to_pairs(&self) -> Vec<(&'static str, String)> {
        let mut p = Vec::new();
        push(&mut p, "idempotency_key", &self.idempotency_key);
        if let Some(s) = &self.status {
            p.push(("status", s.as_str().to_string()));
        }
        push(&mut p, "tenant", &self.tenant);
        push(&mut p, "workspace", &self.workspace);
        push(&mut p, "app", &self.app);
        push(&mut p, "workflow", &self.workflow);
        push(&mut p, "agent", &self.agent);
        push(&mut p, "toolset", &self.toolset);
        push(&mut p, "from", &self.from);
        push(&mut p, "to", &self.to);
        push(&mut p, "expires_from", &self.expires_from);
        push(&mut p, "expires_to", &self.expires_to);
        push(&mut p, "finalized_from", &self.finalized_from);
        push(&mut p, "finalized_to", &self.finalized_to);
        if let Some(s) = &self.sort_by {
            p.push(("sort_by", s.as_str().to_string()));
        }
        if let Some(s) = &self.sort_dir {
            p.push(("sort_dir", s.as_str().to_string()));
        }
        let include: Vec<&str> = self
            .include
            .iter()
            .map(|s| s.trim())
            .filter(|s| !s.is_empty())
            .collect();
        if !include.is_empty() {
            p.push(("include", include.join(",")));
        }
        if let Some(l) = self.limit {
            p.push(("limit", l.to_string()));
        }
        push(&mut p, "cursor", &self.cursor);
        p
    }

    /// The query for the page after `page`, or `None` when `page` is the last one.
    ///
    /// Every filter is kept unchanged because sorted cursors are bound to the filters
    /// (changing them returns 400). The last page is the one with no `next_cursor`, with
    /// `has_more == Some(false)`, or whose cursor equals the one just used (a guard against
    /// a server looping forever on the same page).
    pub fn next_page(&self, page: &ReservationListResponse) -> Option<ListReservationsQuery> {
        let next = page.next_cursor.as_deref().filter(|c| !c.is_empty())?;
        if page.has_more == Some(false) || self.cursor.as_deref() == Some(next) {
            return None;
        }
        let mut q = self.clone();
        q.cursor = Some(next.to_string());
        Some(q)
    }
}

fn push(p: &mut Vec<(&'static str, String)>, name: &'static str, v: &Option<String>) {
    if let Some(v) = v {
        if !v.is_empty() {
            p.push((name, v.clone()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_query_pairs_cover_every_filter() {
        let q = ListReservationsQuery {
            idempotency_key: Some("k".into()),
            status: Some(ReservationStatus::Active),
            tenant: Some("t".into()),
            workspace: Some("w".into()),
            app: Some("a".into()),
            workflow: Some("wf".into()),
            agent: Some("ag".into()),
            toolset: Some("ts".into()),
            from: Some("2026-01-01T00:00:00Z".into()),
            to: Some("".into()),
            expires_from: Some("e1".into()),
            expires_to: Some("e2".into()),
            finalized_from: Some("f1".into()),
            finalized_to: Some("f2".into()),
            sort_by: Some(SortBy::CreatedAtMs),
            sort_dir: Some(SortDir::Asc),
            include: vec!["metadata".into(), " ".into(), "evidence".into()],
            limit: Some(10),
            cursor: Some("c".into()),
        };
        let names: Vec<&str> = q.to_pairs().iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            [
                "idempotency_key",
                "status",
                "tenant",
                "workspace",
                "app",
                "workflow",
                "agent",
                "toolset",
                "from",
                "expires_from",
                "expires_to",
                "finalized_from",
                "finalized_to",
                "sort_by",
                "sort_dir",
                "include",
                "limit",
                "cursor"
            ]
        );
        let pairs = q.to_pairs();
        assert!(pairs.contains(&("include", "metadata,evidence".to_string())));
        assert!(pairs.contains(&("status", "ACTIVE".to_string())));
        assert!(ListReservationsQuery::default().to_pairs().is_empty());
    }

    #[test]
    fn balance_page_with_null_cursor_is_a_last_page() {
        let page: BalanceResponse = serde_json::from_value(serde_json::json!({
            "balances": [], "next_cursor": null, "has_more": false
        }))
        .unwrap();
        assert_eq!((page.next_cursor, page.has_more), (None, Some(false)));
        assert!(
            serde_json::from_value::<BalanceResponse>(serde_json::json!({"balances": null}))
                .is_err()
        );
    }

    #[test]
    fn balance_query_pairs() {
        let q = BalanceQuery {
            include_children: Some(true),
            limit: Some(5),
            ..BalanceQuery::tenant("acme")
        };
        assert_eq!(
            q.to_pairs(),
            vec![
                ("tenant", "acme".to_string()),
                ("include_children", "true".to_string()),
                ("limit", "5".to_string())
            ]
        );
    }

    fn page(next: Option<&str>, more: Option<bool>) -> ReservationListResponse {
        ReservationListResponse {
            reservations: vec![],
            next_cursor: next.map(str::to_string),
            has_more: more,
        }
    }

    #[test]
    fn next_page_follows_cursor_and_stops() {
        let q = ListReservationsQuery {
            tenant: Some("t".into()),
            ..Default::default()
        };
        let n = q.next_page(&page(Some("c1"), Some(true))).unwrap();
        assert_eq!(n.cursor.as_deref(), Some("c1"));
        assert_eq!(n.tenant.as_deref(), Some("t"));
        assert!(
            n.next_page(&page(Some("c1"), Some(true))).is_none(),
            "same cursor loops"
        );
        assert!(q.next_page(&page(None, Some(true))).is_none());
        assert!(q.next_page(&page(Some(""), None)).is_none());
        assert!(q.next_page(&page(Some("c2"), Some(false))).is_none());
        assert!(q.next_page(&page(Some("c2"), None)).is_some());
    }
}
