"""Recovery conformance on journals written by others (CR-DURABLE-005 and CR-DURABLE-007 of
../shared/spec/scenarios.yaml): corrupt and unsupported records are quarantined and reported
while valid records still replay (in a restarted process), and record file names are the
sha256 of the exact UTF-8 reservation id, with legacy names migrated without deleting a
colliding record. Real files (or, for CR-DURABLE-005 with CYCLES_TEST_JOURNAL_STORE=redis, a
real Redis: tests/journal_store.py), real HTTP to the in-process LocalServer."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

import pytest
from journal_store import TestJournal
from recovery_support import (
    ACTION,
    TRICKY_IDS,
    USD,
    Child,
    commit_key,
    events_of,
    plant,
    read_record,
    record_files,
    settlement_requests,
    settlements,
)

import cycles
from cycles import journal
from cycles.testing import LocalServer


def python_sdk_record(rid: str, base_url: str, key: str, amount: int) -> str:
    """A record as the official Python SDK writes it (spaced separators, ``\\u`` escapes, no
    ``mode``): the journal format is shared, so ours must replay it."""
    return (
        f'{{"version": 1, "reservation_id": "{rid}", "base_url": "{base_url}", '
        f'"commit_body": {{"idempotency_key": "{key}", "actual": {{"unit": "{USD}", '
        f'"amount": {amount}}}, "metadata": {{"note": "caf\\u00e9"}}}}, '
        f'"event_fallback_body": null, "recorded_at_ms": {int(time.time() * 1000)}, '
        f'"not_before_ms": null}}'
    )


def reserve(server: LocalServer, key: str) -> str:
    with server.client() as c:
        created = c.create_reservation(
            idempotency_key=key, action=ACTION, estimate=cycles.Amount(USD, 1_000)
        )
    assert created.reservation_id is not None
    return created.reservation_id


# -- CR-DURABLE-005 -------------------------------------------------------------------------


def test_corrupt_and_unsupported_records_are_quarantined_and_valid_records_still_replay(
    server: LocalServer, store: TestJournal, tmp_path: Path
) -> None:
    """CR-DURABLE-005: the journal holds a corrupt record, a record of an unsupported format
    version and a valid one. A restarted process (a fresh interpreter, journal only)
    quarantines the two bad records (kept as evidence, reported as events, never sent) and
    still replays the valid record once, with its stored key."""
    me = (server.url, server.api_key, server.tenant)
    rid = reserve(server, "d5-reserve")
    key = "d5-python-sdk-key"
    valid = journal.file_name(rid)
    store.put(*me, valid, python_sdk_record(rid, server.url, key, 300).encode())
    corrupt, corrupt_bytes = journal.file_name("rsv-corrupt"), b'{"version": 1, "reserv'
    store.put(*me, corrupt, corrupt_bytes)
    future = journal.file_name("rsv-future")
    store.put(*me, future, b'{"version": 2, "reservation_id": "rsv-future", "payload": {}}')
    bad = {name: data for _, name, data in store.records() if name != valid}
    assert sorted(bad) == sorted([corrupt, future])
    for name, error in ((corrupt, "corrupt"), (future, "unsupported")):
        with pytest.raises(cycles.InvalidArgumentError) as invalid:
            journal.parse_record(bad[name])
        assert invalid.value.details == {"journal_error": error}
    assert store.pending() == [rid]

    result = Child(
        {"url": server.url, "api_key": server.api_key, "tenant": server.tenant, **store.spec(),
         "mode": "drain", "timeout": 20},
        tmp_path / "restart.json",
    ).finish()  # fmt: skip
    assert result["report"]["remaining"] == [], result

    # corruption_is_reported: one event per quarantined record, naming it and its new name.
    reported = events_of(result, "journal_quarantined")
    by_file = {store.name_in(e["fields"]["file"]): e for e in reported}
    assert sorted(by_file) == sorted([corrupt, future]), result
    assert len(reported) == 2, result
    assert all(e["disposition"] == "quarantined" for e in by_file.values())
    assert "corrupt" in by_file[corrupt]["fields"]["reason"]
    assert "unsupported" in by_file[future]["fields"]["reason"]
    # corrupt / unsupported_record_version quarantined: renamed, evidence kept, never deleted.
    left = {name: data for _, name, data in store.quarantined()}
    quarantined = {
        "corrupt": [n for n in left if n.startswith(f"{corrupt}.corrupt-")],
        "unsupported": [n for n in left if n.startswith(f"{future}.unsupported-")],
    }
    assert all(len(v) == 1 for v in quarantined.values()) and len(left) == 2, sorted(left)
    for e in reported:
        assert Path(e["fields"]["quarantined_as"]).name in left, (e, sorted(left))
    assert left[quarantined["corrupt"][0]] == corrupt_bytes

    # other_valid_records_still_replay: committed once, stored key, record removed.
    assert [e["reservation_id"] for e in events_of(result, "settlement_settled")] == [rid]
    reqs = settlement_requests(server, rid, key)
    assert [(r.operation, r.idempotency_key, r.status) for r in reqs] == [
        ("commitReservation", key, 200)
    ]
    assert settlements(server, rid, key) == (1, 0)
    # Neither the valid record nor the two quarantined ones is left under a record name.
    assert store.records() == []
    assert store.pending() == []
    assert store.dir_untouched_on_redis()
    # Nothing was ever sent for the quarantined records (expected_requests: []).
    sent = [r for r in server.requests() if r.operation in ("commitReservation", "createEvent")]
    assert [r.reservation_id for r in sent] == [rid]


# -- CR-DURABLE-007 -------------------------------------------------------------------------


def test_journal_file_names_are_sha256_of_the_exact_utf8_id_and_never_shared() -> None:
    """CR-DURABLE-007 (names): the standard file name is ``v2-`` + the lowercase sha256 hex of
    the exact, unnormalised UTF-8 id + ``.json``; ids that a lossy legacy scheme merges (and
    canonically equivalent Unicode) get distinct files."""
    names = {}
    for rid in TRICKY_IDS:
        expected = f"v2-{hashlib.sha256(rid.encode('utf-8')).hexdigest()}.json"
        assert journal.file_name(rid) == expected, rid
        names[rid] = expected
    assert len(set(names.values())) == len(TRICKY_IDS), "distinct ids, distinct files"
    assert journal.file_name("rsv/a") == (
        "v2-e3edb9ca022de3c9c90c5667d47fa66448cee1f254e488a761313faee34141d7.json"
    )
    # The legacy scheme is lossy: these collide there, and only there.
    assert len({journal.legacy_file_name(r) for r in ("rsv/a", "rsv_a", "rsv.a", "rsv a")}) == 1


def test_legacy_record_migrates_to_its_standard_name_without_deleting_a_colliding_record(
    server: LocalServer, tmp_path: Path
) -> None:
    """CR-DURABLE-007 (legacy): the partition holds, under the legacy name of a real
    reservation R, an older SDK's record of ANOTHER id C that collides with R there (C's
    record belongs to another server, so no replay here may work on it). Settling R, through a
    failed attempt, its journal record and a successful replay, writes R's own standard file
    beside it and neither reads nor deletes C's record. A matching legacy record of a real
    reservation R2 migrates to its standard name (reported as ``journal_migrated``) and
    settles once with its stored key. Always on the directory, whatever the store under test:
    legacy names exist only there (Redis keys a record by its standard name alone,
    test_journal_redis.py's key test)."""
    d = tmp_path / "journal"
    part = d / journal.identity_fingerprint(server.url, server.api_key, server.tenant)
    got: list[cycles.LifecycleEvent] = []
    client = server.client(
        journal_dir=d, on_event=got.append, settle_max_attempts=1, replay_interval=3600
    )
    try:
        with client.reserve(1_000, action=ACTION, idempotency_key="d7-r", heartbeat=False) as r:
            rid = r.reservation_id
            # C differs from R, yet the lossy legacy scheme names both the same.
            collider = rid.replace("_", ".", 1)
            assert collider != rid
            legacy = part / journal.legacy_file_name(rid)
            assert legacy.name == journal.legacy_file_name(collider) == f"{rid}.json"
            part.mkdir(parents=True, exist_ok=True)
            c_text = python_sdk_record(collider, "http://127.0.0.1:9", "d7-collider-key", 111)
            plant(legacy, c_text.encode())
            server.add_fault(
                "commitReservation", {"kind": "server_error", "status": 503}, reservation_id=rid
            )
            r.set_actual(400)
        s = r.settlement
        assert s is not None and s.status == "pending" and s.journaled
        standard = part / journal.file_name(rid)
        assert sorted(record_files(d)) == sorted([legacy, standard]), "two ids, two files"
        rec = read_record(standard)
        assert rec is not None and rec.reservation_id == rid and commit_key(rec) == "d7-r:commit"
        assert legacy.read_text() == c_text, "the colliding record is neither read nor touched"

        # A matching legacy record of a real reservation R2 (as an older SDK named it).
        rid2 = reserve(server, "d7-r2")
        legacy2 = part / journal.legacy_file_name(rid2)
        plant(legacy2, python_sdk_record(rid2, server.url, "d7-r2-key", 222).encode())
        pending = {p.reservation_id: p for p in journal.list_pending(d)}
        assert set(pending) == {rid, collider, rid2}
        assert pending[collider].legacy and pending[rid2].legacy and not pending[rid].legacy

        report = client.flush()
        outcomes = {o.reservation_id: o.status for o in report.outcomes}
    finally:
        client.close(timeout=0)  # delivers every event; C stays journaled

    assert outcomes.get(rid) in (None, "committed") and outcomes.get(rid2) in (None, "committed")
    # R settled once with ITS key (never C's); its standard record is gone.
    assert settlements(server, rid, "d7-r:commit") == (1, 0)
    assert not standard.exists()
    # R2 migrated, then settled once with the stored key; no file of it is left.
    assert settlements(server, rid2, "d7-r2-key") == (1, 0)
    assert not legacy2.exists() and not (part / journal.file_name(rid2)).exists()
    # C's colliding legacy record is still there, untouched, and still listed as pending.
    assert legacy.read_text() == c_text, "a colliding legacy record is never deleted"
    assert record_files(d) == [legacy]
    (left,) = journal.list_pending(d)
    assert (left.reservation_id, left.legacy, left.file) == (collider, True, legacy.name)
    kinds: dict[str, Any] = {}
    for e in got:
        kinds.setdefault(e.kind, set()).add(e.reservation_id)
    assert kinds.get("journal_migrated") == {rid2}, kinds
    assert settlement_requests(server, collider, "d7-collider-key") == [], "never sent"
