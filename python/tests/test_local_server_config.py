"""``cycles.testing.LocalServer`` configuration (issue 28): typed ``budgets=``, unknown keys
refused by the bridge with ``InvalidArgumentError`` naming them and where they are (a misspelt
key used to leave the server's default in place silently), and argument errors without serde's
position in JSON the caller never wrote. What the server really runs with is read back from
its own ``/__cycles/config`` route and its ledger."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path
from typing import Any

import pytest

import cycles
from cycles.testing import Budget, LocalServer

ACTION = cycles.Action("llm.completion", "openai:gpt-4o-mini")
SERDE_POSITION = re.compile(r"line \d+ column \d+")


def served_config(server: LocalServer) -> dict[str, Any]:
    """The configuration the running server reports (its inspection route, real HTTP)."""
    with urllib.request.urlopen(f"{server.url}/__cycles/config", timeout=5) as r:
        return json.loads(r.read())  # type: ignore[no-any-return]


def test_a_small_budget_is_what_the_server_enforces(tmp_path: Path) -> None:
    with LocalServer(budgets=[Budget("tenant:acme", "USD_MICROCENTS", 1_000_000)]) as server:
        assert served_config(server)["budgets"] == [
            {
                "scope": "tenant:acme",
                "unit": "USD_MICROCENTS",
                "allocated": 1_000_000,
                "overdraft_limit": 0,
                "status": "ACTIVE",
                "caps": None,
            }
        ]
        with server.client(journal_dir=tmp_path) as client:
            with client.reserve(600_000, action=ACTION) as r:
                r.set_actual(600_000)
            with pytest.raises(cycles.BudgetExceededError):
                with client.reserve(600_000, action=ACTION):
                    pass
            balance = client.get_balances(tenant="acme").balances[0]
        assert balance.allocated is not None and balance.allocated.amount == 1_000_000
        assert [(e.kind, e.amount) for e in server.ledger()] == [
            ("reserve", 600_000),
            ("commit", 600_000),
        ]


def test_budgets_in_another_unit_with_overdraft_and_status(tmp_path: Path) -> None:
    budgets: list[Budget | dict[str, Any]] = [
        Budget("tenant:acme", "TOKENS", 1_000, overdraft_limit=50),
        {"scope": "tenant:acme", "unit": "CREDITS", "allocated": 10, "status": "frozen"},
    ]
    with LocalServer(budgets=budgets) as server, server.client(journal_dir=tmp_path) as client:
        served = served_config(server)["budgets"]
        assert [(b["unit"], b["allocated"], b["overdraft_limit"], b["status"]) for b in served] == [
            ("TOKENS", 1_000, 50, "ACTIVE"),
            ("CREDITS", 10, 0, "FROZEN"),
        ]
        # The default budget is USD_MICROCENTS only: this was UNIT_MISMATCH before.
        with client.reserve(400, unit="TOKENS", action=ACTION) as r:
            r.set_actual(300)
        with pytest.raises(cycles.BudgetFrozenError):
            with client.reserve(1, unit="CREDITS", action=ACTION):
                pass
        with pytest.raises(cycles.UnitMismatchError):  # the default USD budget is gone
            with client.reserve(1, action=ACTION):
                pass
        assert [(e.kind, e.unit, e.amount) for e in server.ledger()] == [
            ("reserve", "TOKENS", 400),
            ("commit", "TOKENS", 300),
        ]


def test_the_keyword_replaces_the_config_budgets() -> None:
    config = {"budgets": [{"scope": "tenant:acme", "unit": "TOKENS", "allocated": 5}]}
    with LocalServer(config, budgets=[Budget("tenant:acme", "CREDITS", 7)]) as server:
        assert [(b["unit"], b["allocated"]) for b in served_config(server)["budgets"]] == [
            ("CREDITS", 7)
        ]


@pytest.mark.parametrize(
    ("config", "text"),
    [
        ({"budget": {"unit": "TOKENS", "allocated": 5}}, "unknown field `budget`"),
        ({"tenant": "acme"}, "unknown field `tenant`"),
        (
            {"budgets": [{"scope": "tenant:acme", "unit": "TOKENS", "allocated": 5, "limit": 1}]},
            "budgets[0]: unknown field `limit`",
        ),
        ({"tenants": [{"id": "acme", "api_key": "k"}]}, "tenants[0]: unknown field `api_key`"),
        ({"regime": {"max_extension": 3}}, "regime: unknown field `max_extension`"),
        (
            {"regime": {"extend": {"kind": "grant_cap", "max_grant_ms": 5, "max_lead_ms": 9}}},
            "regime.extend: unknown field `max_lead_ms`",
        ),
        (
            {"budgets": [{"scope": "tenant:acme", "unit": "TOKENS", "caps": {"max_tokenz": 1}}]},
            "budgets[0].caps: unknown field `max_tokenz`",
        ),
    ],
)
def test_unknown_keys_are_refused_by_name(config: dict[str, Any], text: str) -> None:
    # The bridge's one wording, the same in every language: where, then what.
    with pytest.raises(cycles.InvalidArgumentError) as info:
        LocalServer(config)
    e = info.value
    assert e.message.startswith(f"invalid server config: {text}"), e.message
    assert not SERDE_POSITION.search(str(e))


def test_budget_fields_are_checked() -> None:
    # A budget missing a required field would be the default's: the server refuses it.
    with pytest.raises(
        cycles.InvalidArgumentError, match=r"budgets\[0\]: missing field `allocated`"
    ):
        LocalServer(budgets=[{"scope": "tenant:acme", "unit": "TOKENS"}])
    with pytest.raises(cycles.InvalidArgumentError, match=r"Budget\.allocated must be an int"):
        Budget("tenant:acme", "TOKENS", "1000")  # type: ignore[arg-type]
    with pytest.raises(cycles.InvalidArgumentError, match=r"Budget\.allocated must be an int"):
        Budget("tenant:acme", "TOKENS", 2**63)
    with pytest.raises(cycles.InvalidArgumentError, match=r"Budget\.scope"):
        Budget("", "TOKENS", 1)
    with pytest.raises(cycles.InvalidArgumentError, match=r"Budget\.status"):
        Budget("tenant:acme", "TOKENS", 1, status="PAUSED")  # type: ignore[arg-type]
    with pytest.raises(cycles.InvalidArgumentError, match="budgets: invalid type"):
        LocalServer(budgets=Budget("tenant:acme", "TOKENS", 1))  # type: ignore[arg-type]
    with pytest.raises(cycles.InvalidArgumentError, match=r"budgets\[1\]: invalid type"):
        LocalServer(budgets=[Budget("tenant:acme", "TOKENS", 1), 5])  # type: ignore[list-item]


def test_every_field_the_server_reports_is_accepted() -> None:
    # The server's whole configuration, as it reports it, is a valid config: no field of
    # ServerConfig is missing from the keys this package knows (it would be refused).
    with LocalServer(
        {"regime": {"extend": {"kind": "grant_cap", "max_grant_ms": 1_000}}}
    ) as server:
        full = served_config(server)
    assert set(full) >= {"budgets", "tenants", "regime", "mode", "bind"}
    assert full["regime"]["extend"] == {"kind": "grant_cap", "max_grant_ms": 1_000}
    full["bind"] = "127.0.0.1:0"
    with LocalServer(full) as again:
        assert served_config(again) == full
    # PascalCase kinds, which the server also reads, are checked the same way.
    with LocalServer({"regime": {"extend": {"kind": "MaxLead", "max_lead_ms": 500}}}) as s:
        assert served_config(s)["regime"]["extend"] == {"kind": "max_lead", "max_lead_ms": 500}


def test_server_errors_name_no_json_position() -> None:
    # Values of the wrong type still reach the server's own parser; its message is kept,
    # without the line and column of the JSON this package wrote.
    with pytest.raises(cycles.InvalidArgumentError, match="invalid server config") as info:
        LocalServer({"evidence": "yes"})
    assert "invalid type" in info.value.message
    assert not SERDE_POSITION.search(str(info.value)), info.value
    with LocalServer() as server:
        for rule in (
            {"operation": "commitReservation", "fault": {"kind": "explode"}},
            {"operation": "commitReservation", "fault": {"kind": "delay"}},
            {"operation": "commit", "fault": {"kind": "connection_reset"}},
        ):
            with pytest.raises(cycles.InvalidArgumentError, match="invalid fault rule") as e:
                server.add_fault(rule)
            assert not SERDE_POSITION.search(str(e.value)), e.value
        with pytest.raises(cycles.InvalidArgumentError, match="unknown field `count`"):
            server.add_fault(
                {
                    "operation": "commitReservation",
                    "fault": {"kind": "connection_reset"},
                    "count": 3,
                }
            )
        with pytest.raises(cycles.InvalidArgumentError, match="advance_clock"):
            server.advance_clock(-1)
        assert server.requests() == []


def test_config_errors_python_does_not_check_come_from_the_bridge() -> None:
    # `idempotency_compare` is passed through as given: the bridge's config check names it.
    with pytest.raises(cycles.InvalidArgumentError) as info:
        LocalServer({"idempotency_compare": "nope"})
    assert info.value.message.startswith("invalid server config: "), info.value.message
    assert "nope" in info.value.message
    assert not SERDE_POSITION.search(info.value.message)


def test_a_budget_with_caps_grants_them(tmp_path: Path) -> None:
    caps = cycles.Caps(max_tokens=64, tool_allowlist=["search"])
    with LocalServer(
        budgets=[
            {
                "scope": "tenant:acme",
                "unit": "TOKENS",
                "allocated": 10,
                "caps": {"max_tokens": 64, "tool_allowlist": ["search"]},
            }
        ]
    ) as server:
        assert served_config(server)["budgets"][0]["caps"] == caps.to_json()
        with server.client(journal_dir=tmp_path, default_unit="TOKENS") as client:
            with client.reserve(5, action=ACTION) as r:
                assert r.decision == "ALLOW_WITH_CAPS" and r.caps == caps
                r.release("over the cap")
        assert [e.kind for e in server.ledger()] == ["reserve", "release"]
    with pytest.raises(cycles.InvalidArgumentError, match=r"Budget\.caps"):
        Budget("tenant:acme", "TOKENS", 1, caps={"max_tokens": 1})  # type: ignore[arg-type]
