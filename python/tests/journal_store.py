"""The journal store under test. ``CYCLES_TEST_JOURNAL_STORE=redis`` runs the recovery tests
with their journal in a Redis each test starts itself (AOF, ``appendfsync always``; the
recovery adapter's Redis claim, conformance/adapters/python-redis-map.json); unset, empty or
``file`` is the directory. An unknown value fails loudly rather than silently testing the
default. The recovery tests look into the journal only through :class:`TestJournal`, so the
same assertions hold for both stores (core/tests/common/store.rs does the same for Rust)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import redis
from recovery_support import plant

import cycles
from cycles import journal

# The file store's quarantine names: ``<file>.<kind>-<ms>-<n>`` (core journal::names).
QUARANTINE_MARKS = (".corrupt-", ".unsupported-", ".unrecoverable-")
# A record's key: ``cycles:journal:{<fp16>}:r:<file>`` (docs/journal.md, "Stores").
PREFIX = "cycles:journal:{"


def on_redis() -> bool:
    """Whether this run's journal store is Redis."""
    store = os.environ.get("CYCLES_TEST_JOURNAL_STORE", "")
    assert store in ("", "file", "redis"), (
        f"CYCLES_TEST_JOURNAL_STORE={store!r}: expected file or redis"
    )
    return store == "redis"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """A redis-server of one test on loopback, its data under ``data``; ``aof`` makes every
    write durable before Redis answers (``appendonly yes``, ``appendfsync always``), as the
    journal requires by default. :meth:`stop` kills it."""

    def __init__(self, data: Path, aof: bool = True) -> None:
        exe = shutil.which("redis-server")
        assert exe, "redis-server is not installed (apt-get install redis-server; test-all.sh does)"
        data.mkdir(parents=True, exist_ok=True)
        port = _free_port()
        args = [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", str(data)]
        if aof:
            args += ["--appendonly", "yes", "--appendfsync", "always"]
        self.url = f"redis://127.0.0.1:{port}/0"
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 10
            while True:
                assert self.proc.poll() is None, f"redis-server exited ({self.proc.returncode})"
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    assert time.monotonic() < deadline, "redis-server did not come up"
                    time.sleep(0.02)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


class Db:
    """A connection to a test's Redis, typed: values are bytes (no ``decode_responses``),
    key names str."""

    def __init__(self, url: str) -> None:
        self._r = redis.Redis.from_url(url)

    def get(self, key: str) -> bytes | None:
        got = self._r.get(key)
        assert got is None or isinstance(got, bytes), got
        return got

    def keys(self, pattern: str) -> list[str]:
        return sorted(_text(k) for k in self._r.keys(pattern))

    def set_record(self, part: str, file: str, data: bytes) -> None:
        """As the Redis store keeps a record: its bytes, and its name in the partition's set."""
        self._r.set(_key(part, "r", file), data)
        self._r.sadd(f"{PREFIX}{part}}}:records", file)

    def delete_record(self, part: str, file: str) -> None:
        assert self._r.delete(_key(part, "r", file)) == 1, f"no record {file} in {part}"
        self._r.srem(f"{PREFIX}{part}}}:records", file)

    def value(self, key: str) -> bytes:
        """A string key's bytes, or a set's members (sorted, one a line)."""
        if _text(self._r.type(key)) == "set":
            members = self._r.smembers(key)
            return b"\n".join(sorted(m if isinstance(m, bytes) else m.encode() for m in members))
        return self.get(key) or b""

    def close(self) -> None:
        self._r.close()


def _text(v: bytes | str) -> str:
    return v.decode() if isinstance(v, bytes) else v


class TestJournal:
    """One test's journal: the directory ``dir`` (which need not exist yet), or on Redis a
    Redis of its own whose data lives beside it, ``dir`` then staying unused (a client given
    it must not write there). A context manager: leaving it kills the Redis."""

    __test__ = False  # a helper, not a test class, whatever its name

    def __init__(self, dir: Path) -> None:
        self.dir = dir
        self._server: RedisServer | None = None
        self._redis: Db | None = None
        if on_redis():
            self._server = RedisServer(dir.with_name(dir.name + ".redis-data"))
            self._redis = Db(self._server.url)

    def __enter__(self) -> TestJournal:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._redis is not None:
            self._redis.close()
        if self._server is not None:
            self._server.stop()

    @property
    def url(self) -> str | None:
        """The ``journal_url`` of a Redis run. Its leases last 3 s: a SIGKILLed holder's record
        is taken over within a drain's time (the default, 60 s, would outlast it), and a
        request the server holds for 1.5 s still ends inside its lease."""
        if self._server is None:
            return None
        return f"{self._server.url}?lease_ms=3000"

    def options(self) -> dict[str, Any]:
        """A client's keyword arguments to journal here."""
        return {"journal_dir": self.dir, "journal_url": self.url}

    def spec(self) -> dict[str, Any]:
        """The members a recovery_child.py spec needs to journal here."""
        return {"dir": str(self.dir), "journal_url": self.url}

    def records(self) -> list[tuple[str, str, bytes]]:
        """Every record of every partition: (partition, file name, bytes), sorted. Like
        :meth:`quarantined`, a look at a journal no process is changing (several reads); a
        probe while one is, is :meth:`record_of` (one read)."""
        return self._entries("r")

    def quarantined(self) -> list[tuple[str, str, bytes]]:
        """Every quarantined record of every partition: (partition, name, bytes), sorted."""
        return self._entries("q")

    def record_of(
        self, base_url: str, api_key: str, tenant: str | None, reservation_id: str
    ) -> bytes | None:
        """The bytes of ``reservation_id``'s record in the partition of (base URL, key,
        tenant), under its standard name."""
        part = journal.identity_fingerprint(base_url, api_key, tenant)
        file = journal.file_name(reservation_id)
        if self._redis is None:
            try:
                return (self.dir / part / file).read_bytes()
            except FileNotFoundError:
                return None
        return self._redis.get(_key(part, "r", file))

    def read(
        self, base_url: str, api_key: str, tenant: str | None, reservation_id: str
    ) -> journal.JournalRecord | None:
        """``reservation_id``'s record, parsed, or None when there is none."""
        data = self.record_of(base_url, api_key, tenant, reservation_id)
        return None if data is None else journal.parse_record(data)

    def put(self, base_url: str, api_key: str, tenant: str | None, file: str, data: bytes) -> None:
        """Puts ``data`` as record ``file`` into the partition of (base URL, key, tenant), as
        another writer would have (a corrupt record, another SDK's, another host's copy)."""
        part = journal.identity_fingerprint(base_url, api_key, tenant)
        if self._redis is None:
            plant(self.dir / part / file, data)
            return
        self._redis.set_record(part, file, data)

    def remove(self, base_url: str, api_key: str, tenant: str | None, reservation_id: str) -> None:
        """Removes ``reservation_id``'s record, as if it had never been written here."""
        part = journal.identity_fingerprint(base_url, api_key, tenant)
        file = journal.file_name(reservation_id)
        if self._redis is None:
            (self.dir / part / file).unlink()
            return
        self._redis.delete_record(part, file)

    def pending(self) -> list[str]:
        """The reservation ids of the valid records of every partition (invalid and
        quarantined ones are not pending), in record name order."""
        if self._redis is None:
            return [p.reservation_id for p in journal.list_pending(self.dir)]
        ids = []
        for _, _, data in self.records():
            try:
                ids.append(journal.parse_record(data).reservation_id)
            except cycles.InvalidArgumentError:
                continue  # an invalid record is not pending
        return ids

    def stored(self) -> list[tuple[str, bytes]]:
        """Everything the journal holds, as (name, content): every file of the directory (its
        lock table too), or every Redis key and its value (a set's members, joined)."""
        if self._redis is None:
            if not self.dir.exists():
                return []
            files = sorted(p for p in self.dir.rglob("*") if p.is_file())
            return [(str(p.relative_to(self.dir)), p.read_bytes()) for p in files]
        return [(key, self._redis.value(key)) for key in self._redis.keys("*")]

    def name_in(self, located: str) -> str:
        """The record or quarantine name in where an event says a record is: a path of the
        directory, or ``<journal_url> cycles:journal:{<fp16>}:r:<file>``."""
        if self._redis is None:
            return Path(located).name
        shown, _, key = located.rpartition(" ")
        assert shown.startswith("redis://127.0.0.1:") and key.startswith(PREFIX), located
        return key.split(":", 4)[4]

    def dir_untouched_on_redis(self) -> bool:
        """Whether a Redis run's clients left the unused directory alone (they must)."""
        return self._redis is None or not self.dir.exists()

    def _entries(self, kind: str) -> list[tuple[str, str, bytes]]:
        out: list[tuple[str, str, bytes]] = []
        if self._redis is None:
            if not self.dir.exists():
                return out
            for d in (d for d in self.dir.iterdir() if d.is_dir()):
                for f in (f for f in d.iterdir() if f.is_file()):
                    quarantined = any(m in f.name for m in QUARANTINE_MARKS)
                    record = f.name.endswith(".json") and not quarantined
                    if (kind == "r" and record) or (kind == "q" and quarantined):
                        out.append((d.name, f.name, f.read_bytes()))
        else:
            for key in self._redis.keys(f"{PREFIX}*}}:{kind}:*"):
                part, _, name = key[len(PREFIX) :].partition(f"}}:{kind}:")
                data = self._redis.get(key)
                if data is not None:
                    out.append((part, name, data))
            # The store changes a record's key and its partition's set in one script, so the
            # set lists exactly the keys at any moment (the store scans the set, not the keys).
            sets = {"r": "records", "q": "quarantined"}
            listed = sorted(
                (key[len(PREFIX) : -len(f"}}:{sets[kind]}")], name.decode())
                for key in self._redis.keys(f"{PREFIX}*}}:{sets[kind]}")
                for name in self._redis.value(key).split(b"\n")
                if name
            )
            assert listed == sorted((p, n) for p, n, _ in out), (listed, out)
        return sorted(out)


def _key(part: str, kind: str, file: str) -> str:
    return f"{PREFIX}{part}}}:{kind}:{file}"
