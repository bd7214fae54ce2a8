"""Every case of conformance/vectors/journal.json (identity partitions, file names, record
fixtures) through cycles.journal, checked as core/tests/journal_vectors.rs checks them, so
Python and Rust cannot drift; the ``drain`` fixtures (official SDKs' byte forms: lone
surrogates, big integers, -0.0) drained against the local server, each applied once byte for
byte; plus list_pending against a settlement core left pending."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import ACTION, usd, vectors_path

import cycles
from cycles import journal
from cycles.testing import LocalServer

DOC = json.loads((vectors_path().parent / "journal.json").read_text())


def section(name: str, at_least: int = 1) -> list[dict[str, Any]]:
    cases = DOC.get(name)
    assert cases, f"section {name} is missing or empty"
    assert len(cases) >= at_least, f"section {name} has fewer than {at_least} cases"
    return list(cases)


def ids(cases: list[dict[str, Any]], key: str) -> list[str]:
    return [repr(c[key]) if key != "name" else c["name"] for c in cases]


def test_every_section_is_covered() -> None:
    assert set(DOC) == {"description", "partition", "file_names", "records"}, (
        "a new vector section needs a test here"
    )


@pytest.mark.parametrize("case", section("partition", 5), ids=ids(section("partition"), "fp16"))
def test_partition(case: dict[str, Any]) -> None:
    got = journal.identity_fingerprint(case["base_url"], case["api_key"], case["tenant"])
    assert got == case["fp16"], case.get("note")


@pytest.mark.parametrize(
    "case", section("file_names"), ids=ids(section("file_names"), "reservation_id")
)
def test_file_names(case: dict[str, Any]) -> None:
    rid = case["reservation_id"]
    assert journal.file_name(rid) == case["standard"], rid
    assert journal.legacy_file_name(rid) == case["legacy"], rid


def test_file_names_pinned() -> None:
    assert (
        journal.file_name("rsv/a")
        == "v2-e3edb9ca022de3c9c90c5667d47fa66448cee1f254e488a761313faee34141d7.json"
    )
    assert journal.file_name("rsv/a") != journal.file_name("rsv_a")
    assert journal.legacy_file_name("rsv/a") == journal.legacy_file_name("rsv_a")


def body(text: str | None) -> Any:
    return None if text is None else json.loads(text)


@pytest.mark.parametrize("case", section("records", 15), ids=ids(section("records"), "name"))
def test_records(case: dict[str, Any]) -> None:
    name, e = case["name"], case["expect"]
    data = case["text"].encode()
    if e["ok"] is False:
        with pytest.raises(cycles.InvalidArgumentError) as info:
            journal.parse_record(data)
        assert info.value.details == {"journal_error": e["error"]}, f"{name}: {info.value}"
        assert info.value.message.startswith(f"{e['error']} record: "), name
        return
    r = journal.parse_record(data)
    assert r.version == 1, name
    assert r.reservation_id == e["reservation_id"], name
    assert r.base_url == e["base_url"], name
    assert r.mode == e["mode"], name
    assert r.idempotency_key == e["idempotency_key"], name
    assert r.recorded_at_ms == e["recorded_at_ms"], name
    assert r.not_before_ms == e["not_before_ms"], name
    if "commit_body" in e:
        assert body(r.commit_body) == e["commit_body"], name
    if "event_fallback_body" in e:
        assert body(r.event_fallback_body) == e["event_fallback_body"], name
    assert r.commit_body == e["commit_body_wire"], name
    assert r.event_fallback_body == e["event_fallback_body_wire"], name
    assert list(r.extra_keys) == e["extra_keys"], name


def test_list_pending_sees_a_pending_settlement_until_drained(
    server: LocalServer, tmp_path: Path
) -> None:
    assert journal.list_pending(tmp_path / "missing") == []
    client = server.client(journal_dir=tmp_path, settle_max_attempts=1, replay_interval=3600)
    try:
        server.add_fault("commitReservation", {"kind": "server_error", "status": 503}, times=0)
        with client.reserve(1_000, action=ACTION) as r:
            r.set_actual(640)
        assert r.settlement is not None and r.settlement.pending

        fp = journal.identity_fingerprint(server.url, server.api_key, server.tenant)
        everywhere = journal.list_pending(tmp_path)
        mine = journal.list_pending(tmp_path, server.url, server.api_key, server.tenant)
        assert everywhere == mine
        assert len(mine) == 1
        p = mine[0]
        assert p.reservation_id == r.reservation_id
        assert p.mode == "commit"
        assert p.partition == fp
        assert p.file == journal.file_name(r.reservation_id)
        assert not p.legacy
        assert p.recorded_at_ms is not None
        on_disk = journal.parse_record((tmp_path / fp / p.file).read_bytes())
        assert on_disk.reservation_id == r.reservation_id
        assert on_disk.base_url == server.url
        assert on_disk.commit_body is not None
        assert json.loads(on_disk.commit_body)["actual"]["amount"] == 640
        # Another identity's partition is empty.
        assert journal.list_pending(tmp_path, server.url, "other-key", "other-tenant") == []

        server.clear_faults()
        report = client.drain(5.0)
        assert report.settled == 1 and report.remaining == ()
        assert journal.list_pending(tmp_path) == []
        assert journal.list_pending(tmp_path, server.url, server.api_key, server.tenant) == []
    finally:
        client.close()


def test_list_pending_needs_both_base_url_and_api_key(tmp_path: Path) -> None:
    with pytest.raises(cycles.InvalidArgumentError):
        journal.list_pending(tmp_path, base_url="http://localhost")


def live(text: str, subs: list[tuple[str, str]]) -> str:
    """A fixture with the live reservation id and server URL substituted."""
    for old, new in subs:
        text = text.replace(old, new)
    return text


def test_drain_fixtures_are_applied_once_byte_for_byte(server: LocalServer, tmp_path: Path) -> None:
    cases = [c for c in section("records") if c.get("drain")]
    assert len(cases) >= 4, "drain fixtures missing"
    part = tmp_path / journal.identity_fingerprint(server.url, server.api_key, server.tenant)
    part.mkdir(parents=True)
    expected = []
    # Reservations through a client that journals elsewhere: the journaling client below
    # starts its replayer on open, and must find every record already in place.
    with server.client(journal_dir=tmp_path / "other") as plain:
        for c in cases:
            e = c["expect"]
            rid = plain.create_reservation(
                idempotency_key=f"reserve-{c['name']}", action=ACTION, estimate=usd(1_000)
            ).reservation_id
            assert rid is not None
            subs = [
                (json.dumps(e["reservation_id"]), json.dumps(rid)),
                ('"http://localhost"', json.dumps(server.url)),
            ]
            (part / journal.file_name(rid)).write_text(live(c["text"], subs), encoding="utf-8")
            wire = e["event_fallback_body_wire" if e["mode"] == "event" else "commit_body_wire"]
            expected.append((c["name"], e["idempotency_key"], e["mode"], live(wire, subs)))
    pending = journal.list_pending(tmp_path, server.url, server.api_key, server.tenant)
    assert len(pending) == len(cases), "every record is listed as valid"
    with server.client(journal_dir=tmp_path, replay_interval=3600) as client:
        # The replayer's first pass may settle some before drain() runs: the ledger counts.
        report = client.drain(10.0)
    assert report.clean, report
    ledger, requests = server.ledger(), server.requests()
    for name, key, mode, wire in expected:
        applied = [entry for entry in ledger if entry.idempotency_key == key]
        assert [entry.kind for entry in applied] == [mode], name
        sent = [r for r in requests if r.idempotency_key == key]
        assert [r.body for r in sent] == [wire], name
        assert sent[0].status == (201 if mode == "event" else 200), name
    assert journal.list_pending(tmp_path) == []
