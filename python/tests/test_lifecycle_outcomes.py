"""Settlement outcomes beyond a plain commit, seen through the Python API: recovered via an
event, rejected, a quarantined journal file, and the commit-time metrics and metadata. Each
outcome is checked three ways: the caller's ``Settlement``, the events (callback and the
``cycles`` logger), and what the local server actually applied."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from conftest import usd

import cycles
from cycles.testing import LocalServer

ACTION = cycles.Action("llm.completion", "openai:gpt-4o-mini", tags=["bench"])


def cycles_records(caplog: pytest.LogCaptureFixture) -> dict[str, logging.LogRecord]:
    """The last ``cycles`` log record of each event kind."""
    return {
        getattr(x, "event_kind", ""): x
        for x in caplog.records
        if x.name == "cycles" and hasattr(x, "event_kind")
    }


def test_expired_reservation_is_recovered_via_an_event(
    server: LocalServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="cycles")
    got: list[cycles.LifecycleEvent] = []
    with server.client(journal_dir=tmp_path, on_event=got.append) as client:
        # No heartbeat: the lease is left to lapse on purpose (server clock moved past
        # ttl + grace), so the commit answers 410 RESERVATION_EXPIRED.
        with client.reserve(
            500, action=ACTION, ttl_ms=1_000, grace_period_ms=0, heartbeat=False
        ) as r:
            server.advance_clock(5_000)
            r.set_actual(321)
    s = r.settlement
    assert s is not None
    assert s.status == cycles.SettlementStatus.RECOVERED_VIA_EVENT and s.settled
    assert s.body is not None and s.body.get("status") == "APPLIED"
    # Nothing was capped, so the event response carries no `charged`: the amount applied is
    # the event's whole actual, reported like a commit's.
    assert "charged" not in s.body
    assert s.charged == cycles.Amount(cycles.Unit.USD_MICROCENTS, 321)

    applied = [(e.kind, e.amount, e.reservation_id) for e in server.ledger()]
    assert applied[0][0] == "reserve"
    assert [a for a in applied if a[0] in ("commit", "event")] == [("event", 321, None)]
    commit, event = [
        x for x in server.requests() if x.operation in ("commitReservation", "createEvent")
    ]
    assert commit.status == 410 and event.status == 201
    assert event.idempotency_key == commit.idempotency_key  # the event reuses the commit's key

    kinds = [e.kind for e in got]
    assert kinds.index("settlement_mode_switched") < kinds.index("settlement_settled")
    settled = next(e for e in got if e.kind == "settlement_settled")
    assert settled.reservation_id == r.reservation_id
    assert settled.fields["mode"] == "event"
    logged = cycles_records(caplog)
    assert logged["settlement_mode_switched"].levelno == logging.INFO
    assert logged["settlement_settled"].__dict__["reservation_id"] == r.reservation_id
    assert list(tmp_path.rglob("v2-*.json")) == []  # settled: no record left


def test_capped_event_recovery_reports_the_servers_charged(tmp_path: Path) -> None:
    budget = {"scope": "tenant:acme", "unit": "USD_MICROCENTS", "allocated": 1_000}
    with LocalServer({"budgets": [budget]}) as server, server.client(journal_dir=tmp_path) as c:
        with c.reserve(
            500,
            action=ACTION,
            ttl_ms=1_000,
            grace_period_ms=0,
            heartbeat=False,
            overage_policy="ALLOW_IF_AVAILABLE",
        ) as r:
            server.advance_clock(5_000)
            r.set_actual(5_000)
        events = [e for e in server.ledger() if e.kind == "event"]
    s = r.settlement
    assert s is not None and s.status == cycles.SettlementStatus.RECOVERED_VIA_EVENT
    assert len(events) == 1 and events[0].amount is not None and events[0].amount < 5_000
    applied = cycles.Amount(cycles.Unit.USD_MICROCENTS, events[0].amount)
    assert s.body is not None and s.body["charged"] == applied.to_json()
    assert s.charged == applied


def test_terminal_rejection_is_reported_and_drops_the_record(
    server: LocalServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="cycles")
    got: list[cycles.LifecycleEvent] = []
    server.add_fault(
        "commitReservation", {"kind": "error", "status": 409, "code": "BUDGET_EXCEEDED"}
    )
    with server.client(journal_dir=tmp_path, on_event=got.append) as client:
        with client.reserve(500, action=ACTION) as r:
            r.set_actual(400)
    s = r.settlement
    assert s is not None
    assert s.status == cycles.SettlementStatus.REJECTED and not s.settled and not s.pending
    assert (s.http_status, s.error_code, s.error_kind) == (
        409,
        "BUDGET_EXCEEDED",
        "BUDGET_EXCEEDED",
    )

    assert [e.kind for e in server.ledger()] == ["reserve"]  # nothing applied
    failed = next(e for e in got if e.kind == "settlement_attempt_failed")
    assert failed.reservation_id == r.reservation_id
    assert (failed.error_kind, failed.disposition) == ("BUDGET_EXCEEDED", "rejected")
    assert cycles_records(caplog)["settlement_attempt_failed"].levelno == logging.WARNING
    # A genuine terminal rejection: the record is removed, a replay sends nothing more.
    assert list(tmp_path.rglob("v2-*.json")) == []
    assert [x.operation for x in server.requests()].count("commitReservation") == 1


def test_corrupt_journal_file_is_quarantined_and_reported(
    server: LocalServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="cycles")
    partition = tmp_path / cycles.journal.identity_fingerprint(
        server.url, server.api_key, server.tenant
    )
    partition.mkdir(parents=True)
    bad = partition / cycles.journal.file_name("res-corrupt")
    bad.write_text("{ not json", encoding="utf-8")
    got: list[cycles.LifecycleEvent] = []
    client = server.client(journal_dir=tmp_path, on_event=got.append)
    report = client.drain(5.0)
    client.close()

    assert report.remaining == () and report.outcomes == ()
    assert not bad.exists()
    kept = [p for p in partition.iterdir() if p.name.startswith(bad.name + ".corrupt-")]
    assert len(kept) == 1 and kept[0].read_text(encoding="utf-8") == "{ not json"
    # The background replay (started with the lifecycle) may get there before the drain's
    # own scan; either way it is quarantined once and reported by an event.
    assert report.quarantined in ((), (kept[0].name,))
    (q,) = [e for e in got if e.kind == "journal_quarantined"]
    assert q.disposition == "quarantined"
    assert q.fields["quarantined_as"] == kept[0].name
    rec = cycles_records(caplog)["journal_quarantined"]
    assert rec.levelno == logging.ERROR
    assert server.requests() == []  # a corrupt record is never sent anywhere


def test_metrics_and_metadata_reach_the_commit_and_the_journal(
    server: LocalServer, tmp_path: Path
) -> None:
    metrics = cycles.StandardMetrics(
        tokens_input=12, tokens_output=34, latency_ms=56, model_version="m-1", custom={"k": 1}
    )
    metadata = {"run": "r-7", "attempt": 2}
    # The first commit fails, so the journaled record shows the exact body that is sent.
    server.add_fault("commitReservation", {"kind": "server_error", "status": 503}, times=0)
    client = server.client(journal_dir=tmp_path, settle_max_attempts=1, replay_interval=3600)
    with client.reserve(500, action=ACTION) as r:
        r.set_metrics(metrics)
        r.set_metadata(metadata)
        r.set_actual(99)
    assert r.settlement is not None and r.settlement.pending

    (pending,) = cycles.journal.list_pending(tmp_path, server.url, server.api_key, server.tenant)
    record = cycles.journal.parse_record((tmp_path / pending.partition / pending.file).read_bytes())
    assert record.commit_body is not None and record.event_fallback_body is not None
    body = json.loads(record.commit_body)
    assert body["actual"] == {"unit": "USD_MICROCENTS", "amount": 99}
    assert body["metrics"] == {
        "tokens_input": 12,
        "tokens_output": 34,
        "latency_ms": 56,
        "model_version": "m-1",
        "custom": {"k": 1},
    }
    assert body["metadata"] == metadata
    assert json.loads(record.event_fallback_body)["metrics"] == body["metrics"]

    server.clear_faults()
    assert client.drain(5.0).settled == 1
    client.close()
    # The server validated and stored what was sent: metrics passed its schema check,
    # the metadata is the reservation's committed_metadata.
    assert [(e.kind, e.amount) for e in server.ledger()][-1] == ("commit", 99)
    with server.client() as plain:
        detail = plain.get_reservation(r.reservation_id)
    assert detail.committed_metadata == metadata


def test_metrics_as_a_mapping_and_bad_arguments(server: LocalServer, tmp_path: Path) -> None:
    with server.client(journal_dir=tmp_path) as client:
        with client.reserve(500, action=ACTION) as r:
            r.set_metrics({"tokens_input": 1, "custom": {"a": "b"}})
            r.set_actual(5)
        # The server checks the metrics' schema: a bad body would be a 400, not a commit.
        assert r.settlement is not None and r.settlement.status == "committed"
        with pytest.raises(cycles.InvalidArgumentError, match="metadata must be a mapping"):
            with client.reserve(500, action=ACTION) as r2:
                r2.set_metadata(["not", "a", "mapping"])  # type: ignore[arg-type]
        with pytest.raises(cycles.InvalidArgumentError, match="metrics must be"):
            with client.reserve(500, action=ACTION) as r3:
                r3.set_metrics(42)  # type: ignore[arg-type]
    # Raised before any actual was known: both were released, nothing committed for them.
    assert r2.released and r3.released
    assert [(e.kind, e.amount) for e in server.ledger() if e.kind != "reserve"] == [
        ("commit", 5),
        ("release", 500),
        ("release", 500),
    ]


def test_metadata_and_metrics_numbers_reach_journal_and_wire_exactly(
    server: LocalServer, tmp_path: Path
) -> None:
    # What Python's json writes is what is journaled and sent: integers beyond 64 bits,
    # -0.0, 0.1 (shortest repr), key order (integer-like keys too), unpaired surrogates.
    metadata = {"big": 10**30, "neg_zero": -0.0, "p": 0.1, "s": "ab\ud800", "10": 1, "2": -(2**70)}
    metrics = {"tokens_input": 3, "custom": {"huge": 10**40, "ratio": 1 / 3}}
    meta_text = json.dumps(metadata, separators=(",", ":"))
    custom_text = json.dumps(metrics["custom"], separators=(",", ":"))
    assert "1000000000000000000000000000000" in meta_text and "\\ud800" in meta_text
    server.add_fault("commitReservation", {"kind": "server_error", "status": 503}, times=0)
    client = server.client(journal_dir=tmp_path, settle_max_attempts=1, replay_interval=3600)
    with client.reserve(500, action=ACTION) as r:
        r.set_metadata(metadata)
        r.set_metrics(metrics)
        r.set_actual(77)
    assert r.settlement is not None and r.settlement.pending

    (pending,) = cycles.journal.list_pending(tmp_path, server.url, server.api_key, server.tenant)
    record = cycles.journal.parse_record((tmp_path / pending.partition / pending.file).read_bytes())
    assert record.commit_body is not None and record.event_fallback_body is not None
    assert record.commit_body.endswith(
        f'"metrics":{{"tokens_input":3,"custom":{custom_text}}},"metadata":{meta_text}}}'
    ), record.commit_body
    # The event fallback keeps the same exact text and appends the recovery members.
    assert f'"custom":{custom_text}' in record.event_fallback_body
    assert f'"metadata":{meta_text[:-1]},"recovered_reservation_id":' in record.event_fallback_body
    assert json.loads(record.commit_body)["metadata"]["big"] == 10**30

    server.clear_faults()
    assert client.drain(5.0).clean
    client.close()
    commits = [q for q in server.requests() if q.operation == "commitReservation"]
    assert [q.status for q in commits] == [503, 200]
    # The first attempt and the replay sent exactly the journaled bytes.
    assert [q.body for q in commits] == [record.commit_body, record.commit_body]
    assert [(e.kind, e.amount) for e in server.ledger()][-1] == ("commit", 77)


def test_metadata_that_is_not_json_is_a_clear_error(server: LocalServer, tmp_path: Path) -> None:
    with server.client(journal_dir=tmp_path) as client:
        for bad in ({"x": float("nan")}, {"x": object()}):
            with pytest.raises(cycles.InvalidArgumentError, match="metadata is not JSON"):
                with client.reserve(500, action=ACTION) as r:
                    r.set_metadata(bad)
            assert r.released


def test_every_call_sends_metadata_exactly_as_given(server: LocalServer, tmp_path: Path) -> None:
    # The typed calls and the guard's reserve-time metadata take the same exact path as
    # set_metadata: nothing passes through a 64-bit number on the way to the wire.
    metadata = {"big": 10**30, "neg_zero": -0.0, "p": 0.1, "s": "ab\ud800", "10": -(2**70)}
    meta_text = json.dumps(metadata, separators=(",", ":"))
    custom = {"huge": 10**40}
    custom_text = json.dumps(custom, separators=(",", ":"))
    with server.client(journal_dir=tmp_path) as client:
        created = client.create_reservation(
            idempotency_key="exact-create", action=ACTION, estimate=usd(500), metadata=metadata
        )
        rid = created.reservation_id
        assert rid is not None
        client.extend_reservation(
            rid, idempotency_key="exact-extend", extend_by_ms=1_000, metadata=metadata
        )
        client.commit_reservation(
            rid,
            idempotency_key="exact-commit",
            actual=usd(400),
            metrics={"custom": custom},
            metadata=metadata,
        )
        client.decide(
            idempotency_key="exact-decide", action=ACTION, estimate=usd(1), metadata=metadata
        )
        client.create_event(
            idempotency_key="exact-event", action=ACTION, actual=usd(1), metadata=metadata
        )
        with client.reserve(500, action=ACTION, metadata=metadata) as r:
            r.set_actual(1)
    sent: dict[str | None, str | None] = {}
    for q in server.requests():  # the typed call's body: the first of each operation
        sent.setdefault(q.operation, q.body)
    ops = ("createReservation", "extendReservation", "commitReservation", "decide", "createEvent")
    for op in ops:
        assert f'"metadata":{meta_text}' in (sent[op] or ""), (op, sent[op])
    assert f'"custom":{custom_text}' in (sent["commitReservation"] or "")
    creates = [q.body or "" for q in server.requests() if q.operation == "createReservation"]
    assert len(creates) == 2  # the typed call's and the guard's
    assert all(f'"metadata":{meta_text}' in body for body in creates), creates
    assert r.settlement is not None and r.settlement.status == "committed"
