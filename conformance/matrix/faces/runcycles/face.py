"""The runcycles face of the cross-language matrix (conformance/matrix/PROTOCOL.md): the
official Python SDK ``runcycles`` 0.5.3 as a journal writer and reader.

It answers only the journal ops: ``journal_names``, ``fingerprint``, ``write`` and
``drain``; every other op is a ``fail`` ("op ... not supported"). What
runcycles offers and how this driver uses it:

- ``fingerprint``: ``runcycles.journal.auth_fingerprint`` (public).
- ``journal_names``: the standard name is observed, not computed: the record runcycles'
  public ``CommitJournal.record`` writes for the id in a scratch directory. runcycles has no
  public legacy-name function; the legacy name is its reader's own helper
  (``runcycles.journal._legacy_filename``), confirmed through the public
  ``CommitJournal.discard``, which removes exactly that legacy file for the id.
- ``write``: one ``@runcycles.cycles`` call with retries disabled (``retry_enabled=False``,
  its fewest: the failed settlement is journaled and left for replay); metrics and metadata
  through ``get_cycles_context()``. runcycles has no settlement outcome: ``pending`` when
  its journal holds the reservation afterwards, else ``settled``.
- ``drain``: a fresh child process per drain (runcycles replays an identity directory at
  most once per process) builds a ``CyclesLifecycle`` (which hands its retry engine a
  client: the replay) and waits with ``CommitRetryEngine.flush(timeout)``. runcycles has no
  drain report: the counts are read from the journal directory before and after (settled:
  records gone; pending: records left; quarantined: new ``*.corrupt`` files).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import runcycles  # type: ignore[import-untyped]
from runcycles import journal as rc_journal
from runcycles.lifecycle import CyclesLifecycle  # type: ignore[import-untyped]
from runcycles.models import CyclesMetrics  # type: ignore[import-untyped]
from runcycles.retry import CommitRetryEngine  # type: ignore[import-untyped]

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))
from protocol import Op, Refused, serve, unfaithful  # shared with the Python face

SUBJECT_FIELDS = ("tenant", "workspace", "app", "workflow", "agent", "toolset", "dimensions")


def check_faithful(v: Any, where: str) -> None:
    found = unfaithful(v, where)
    if found:
        raise Refused(f"runcycles face: {found} (metadata passes through Python's json)")


# -- names ------------------------------------------------------------------------------------


def op_journal_names(req: dict[str, Any]) -> Any:
    rid = req["reservation_id"]
    with tempfile.TemporaryDirectory() as tmp:
        j = rc_journal.CommitJournal(Path(tmp))
        # A record runcycles' reader accepts (discard() parses the legacy file first).
        body = {"idempotency_key": "matrix-names"}
        record = rc_journal.PendingCommitRecord(reservation_id=rid, base_url="", commit_body=body)
        j.record(record)  # never raises; logs and writes nothing when it cannot
        written = os.listdir(tmp)
        if len(written) != 1:
            raise Refused(f"runcycles face: runcycles wrote no record for {rid!r}")
        standard = written[0]
        legacy = rc_journal._legacy_filename(rid)
        try:
            os.rename(os.path.join(tmp, standard), os.path.join(tmp, legacy))
        except OSError as e:
            raise Refused(f"runcycles face: legacy name {legacy!r} not usable here: {e}") from e
        j.discard(rid)
        if os.path.exists(os.path.join(tmp, legacy)):
            raise Refused(
                f"runcycles face: discard() left {legacy!r} (runcycles' reader refuses a record "
                f"for {rid!r}, or that is not its legacy name)"
            )
    return {"standard": standard, "legacy": legacy}


def op_fingerprint(req: dict[str, Any]) -> Any:
    return rc_journal.auth_fingerprint(req["base_url"], req["api_key"], req.get("tenant"))


# -- write ------------------------------------------------------------------------------------


def config(req: dict[str, Any], **kw: Any) -> Any:
    return runcycles.CyclesConfig(
        base_url=req["url"],
        api_key=req["api_key"],
        tenant=req.get("tenant"),
        journal_dir=req["journal_dir"],
        **kw,
    )


def partition(req: dict[str, Any]) -> Path:
    fp: str = rc_journal.auth_fingerprint(req["url"], req["api_key"], req.get("tenant"))
    return Path(req["journal_dir"]) / fp


def pending_ids(req: dict[str, Any]) -> set[str]:
    """The reservations runcycles would replay for this identity and server."""
    entries = rc_journal.CommitJournal(partition(req)).load_pending(req["url"])
    return {e.reservation_id for e in entries}


def op_write(req: dict[str, Any]) -> Any:
    case = req["case"]
    check_faithful(case.get("metadata"), "metadata")
    check_faithful(case.get("metrics"), "metrics")
    subject = dict(case.get("subject") or {})
    unknown = set(subject) - set(SUBJECT_FIELDS)
    if unknown:
        raise Refused(f"runcycles face: @cycles takes no subject field {sorted(unknown)}")
    seen: list[str] = []
    # Retries off: the failed settlement is journaled, nothing retries it in this process.
    cfg = config(req, retry_enabled=False, retry_flush_timeout=0)
    with runcycles.CyclesClient(cfg) as client:

        @runcycles.cycles(  # type: ignore[untyped-decorator]
            case["estimate"]["amount"],
            actual=case["actual"],
            unit=case["estimate"]["unit"],
            action_kind=case["action"]["kind"],
            action_name=case["action"]["name"],
            client=client,
            **subject,
        )
        def work() -> None:
            ctx = runcycles.get_cycles_context()
            seen.append(ctx.reservation_id)
            if case.get("metrics") is not None:
                ctx.metrics = CyclesMetrics(**case["metrics"])
            if case.get("metadata") is not None:
                ctx.commit_metadata = case["metadata"]

        work()
    rid = seen[0]
    return {"reservation_id": rid, "outcome": "pending" if rid in pending_ids(req) else "settled"}


# -- drain ------------------------------------------------------------------------------------


def corrupt_files(req: dict[str, Any]) -> set[str]:
    part = partition(req)
    return {p.name for p in part.glob("*.corrupt")} if part.is_dir() else set()


def drain_here(req: dict[str, Any]) -> dict[str, int]:
    """One replay of the journal, as a fresh process of an application does it."""
    corrupt_before = corrupt_files(req)
    before = pending_ids(req)  # runcycles' own scan (it also quarantines unreadable files)
    cfg = config(req, retry_initial_delay=0.01, retry_flush_timeout=0)
    engine = CommitRetryEngine(cfg)
    with runcycles.CyclesClient(cfg) as client:
        CyclesLifecycle(client, engine, {})  # hands the engine a client: it replays now
        engine.flush(req["timeout_ms"] / 1000.0)
    after = pending_ids(req)
    return {
        "settled": len(before - after),
        "pending": len(after),
        "quarantined": len(corrupt_files(req) - corrupt_before),
    }


def op_drain(req: dict[str, Any]) -> Any:
    child = subprocess.run(
        [sys.executable, __file__, "--drain-child"],
        input=json.dumps(req),
        capture_output=True,
        text=True,
        timeout=req["timeout_ms"] / 1000.0 + 60,
        check=False,
    )
    if child.returncode != 0:
        raise Refused(
            f"runcycles face: drain child exited {child.returncode}: {child.stderr[-2000:]}"
        )
    return json.loads(child.stdout)


# -- transport --------------------------------------------------------------------------------

OPS: dict[str, Op] = {
    "journal_names": op_journal_names,
    "fingerprint": op_fingerprint,
    "write": op_write,
    "drain": op_drain,
}


def main() -> None:
    if sys.argv[1:] == ["--drain-child"]:
        print(json.dumps(drain_here(json.loads(sys.stdin.read()))), flush=True)
        os._exit(0)  # no atexit waits: what is unsettled stays journaled
    serve("runcycles", OPS, lambda e: None)


if __name__ == "__main__":
    main()
