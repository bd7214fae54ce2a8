"""Child process of test_interop_runcycles.py: one ``runcycles`` (the official Python SDK)
guarded call against the parent's LocalServer, then wait to be SIGKILLed.

The parent makes every commit fail, so when the guarded call returns, runcycles has
journaled the settlement and handed it to its in-memory retry thread. The parent kills this
process there: only the journal record on disk survives, as after a real crash.

Argument: one JSON object with ``base_url``, ``api_key``, ``tenant`` (or null),
``subject_tenant``, ``journal_dir``, ``estimate``, ``actual``. Prints one JSON line,
``{"reservation_id": ...}``, once the guarded call returned.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from runcycles import (  # type: ignore[import-untyped]
    CyclesClient,
    CyclesConfig,
    cycles,
    get_cycles_context,
)


def main() -> None:
    args: dict[str, Any] = json.loads(sys.argv[1])
    config = CyclesConfig(
        base_url=args["base_url"],
        api_key=args["api_key"],
        tenant=args["tenant"],
        journal_dir=args["journal_dir"],
        # Retry stays enabled: the settlement is mid-retry in memory when the kill lands.
        retry_initial_delay=0.05,
    )
    seen: list[str] = []

    @cycles(
        args["estimate"],
        actual=args["actual"],
        action_kind="llm.completion",
        action_name="openai:gpt-4o-mini",
        tenant=args["subject_tenant"],
        client=CyclesClient(config),
    )
    def work() -> None:
        seen.append(get_cycles_context().reservation_id)

    work()
    print(json.dumps({"reservation_id": seen[0]}), flush=True)
    sys.stdin.read()  # until the parent kills us


if __name__ == "__main__":
    main()
