"""Client CPU per model call of each Python integration against the bare library call, in one
process, in alternating rounds (docs/benchmarks.md, "Integrations"): the bare ``openai``
``chat.completions.create`` and the same through ``cycles.integrations.openai.guard``; the
bare ``anthropic`` ``messages.create`` and the same guarded; LangChain's ``ChatOpenAI.invoke``
bare and guarded (when langchain-openai is installed); an OpenAI Agents SDK ``Runner.run`` of a
one-turn agent with the bare ``OpenAIResponsesModel`` and the same model guarded (when
openai-agents is installed). The yardsticks of the goal (the guard adds at most one bare
create + commit pair): that pair through this SDK (``create_reservation`` +
``commit_reservation``, sync and async clients) and over ``http.client``, against the same
server; the guarded lifecycle alone (``with client.reserve(...)``, no provider call); and the
``openai`` call guarded by hand (that lifecycle around the bare call), so what the integration
itself adds (estimate, caps, usage, actual, settlement) is guarded minus by hand; and, the
yardstick the goal is read against, each library's bare call inside an ``http.client`` create +
commit pair (``<lib> inside an http.client pair``: the pair where the guard's runs, with the
library's Python around it, not in a tight loop).

The fake provider and the Cycles server run as their own processes (``cycles fake-provider``,
``cycles serve``), so ``time.process_time()`` here is the client's CPU only (Python and core's
runtime threads alike), divided by its calls. Every round of one path is ``--calls`` calls; the
paths take turns, ``--rounds`` times, after one warm-up round each; medians are reported. The
crash journal is off by default (``--journal on`` turns it on), as in the Node benchmark; at
the end nothing may stay reserved on the server, or the run fails.

    python integrations_bench.py --cycles-bin BIN [--rounds 5] [--calls 200] [--json PATH]

``python/scripts/bench.sh --integrations`` builds the release wheel and CLI, installs the
pinned libraries and runs this. No test asserts a timing; the figures are read, not checked.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any, Callable

import anthropic
import lifecycle_bench as lb
import openai

import cycles
from cycles.integrations.anthropic import guard as guard_anthropic
from cycles.integrations.openai import guard as guard_openai
from cycles.pricing import Pricing

PRICING: Pricing = {
    "unit": lb.UNIT,
    "default": {"input_per_mtok": 15_000_000, "output_per_mtok": 60_000_000},
}
PROMPT = "say hello to me"


class FakeProviderProcess:
    """``cycles fake-provider --port 0`` as a child process."""

    def __init__(self, cycles_bin: str) -> None:
        self.proc = subprocess.Popen(
            [cycles_bin, "fake-provider", "--port", "0"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        start = line.find("http://")
        if start < 0:
            self.stop()
            raise SystemExit(f"the fake provider did not start: {line!r}")
        self.url = line[start:].split()[0].rstrip("/")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


Sync = Callable[[], object]


def _paths(
    url: str, provider: str, loop: asyncio.AbstractEventLoop, journal: bool
) -> dict[str, Sync]:
    """Each measured path as a function making one call."""
    opts: dict[str, Any] = {
        "base_url": url,
        "api_key": lb.API_KEY,
        "tenant": lb.TENANT,
        "journal_enabled": journal,
        "journal_dir": tempfile.mkdtemp(prefix="cycles-bench-"),
    }
    c = cycles.Client(**opts)
    ac = cycles.AsyncClient(**opts)
    oai = openai.OpenAI(base_url=f"{provider}/v1", api_key="sk-fake", max_retries=0)
    ant = anthropic.Anthropic(base_url=provider, api_key="sk-ant-fake", max_retries=0)
    g_oai = guard_openai(oai, cycles=c, pricing=PRICING)
    g_ant = guard_anthropic(ant, cycles=c, pricing=PRICING)
    user: Any = [{"role": "user", "content": PROMPT}]

    def on_loop(make: Callable[[], Any]) -> Sync:
        return lambda: loop.run_until_complete(make())

    action = cycles.Action(lb.ACTION_KIND, lb.ACTION_NAME)

    def sdk_pair() -> object:
        key = f"pair-{uuid.uuid4()}"
        r = c.create_reservation(
            idempotency_key=key, action=action, estimate=cycles.Amount(lb.UNIT, lb.ESTIMATE)
        )
        assert r.reservation_id is not None
        return c.commit_reservation(
            r.reservation_id,
            idempotency_key=f"{key}:commit",
            actual=cycles.Amount(lb.UNIT, lb.ACTUAL),
        )

    async def sdk_async_pair() -> object:
        key = f"apair-{uuid.uuid4()}"
        r = await ac.create_reservation(
            idempotency_key=key, action=action, estimate=cycles.Amount(lb.UNIT, lb.ESTIMATE)
        )
        assert r.reservation_id is not None
        return await ac.commit_reservation(
            r.reservation_id,
            idempotency_key=f"{key}:commit",
            actual=cycles.Amount(lb.UNIT, lb.ACTUAL),
        )

    def lifecycle() -> object:
        # What every guarded call runs around the provider call: the guarded lifecycle
        # (reserve, heartbeat armed, commit of the actual), with no provider call inside.
        with c.reserve(cycles.Amount(lb.UNIT, lb.ESTIMATE), action=action) as r:
            r.set_actual(cycles.Amount(lb.UNIT, lb.ACTUAL))
        return r

    async def async_lifecycle() -> object:
        async with ac.reserve(cycles.Amount(lb.UNIT, lb.ESTIMATE), action=action) as r:
            r.set_actual(cycles.Amount(lb.UNIT, lb.ACTUAL))
        return r

    def openai_by_hand() -> object:
        # The same call guarded by hand: the lifecycle around the bare call, the actual taken
        # from the response (what the 24-line wrapper did). The integration's own work
        # (core's estimate, caps, usage, actual, settlement) is what guarded adds to this.
        with c.reserve(cycles.Amount(lb.UNIT, lb.ESTIMATE), action=action) as r:
            reply = oai.chat.completions.create(model="gpt-fake", max_tokens=64, messages=user)
            assert reply.usage is not None
            r.set_actual(cycles.Amount(lb.UNIT, reply.usage.total_tokens))
        return reply

    bare_pair, _conn = lb._bare_sync(url)
    create, commit, _conn2 = lb._bare_sync_steps(url)

    def in_pair(call: Sync) -> Sync:
        # The yardstick in place: an http.client create before the bare call and its commit
        # after, so the pair runs where the guard's does (its cost there, not in a tight loop).
        def paired() -> object:
            rid, key = create()
            reply = call()
            commit(rid, key)
            return reply

        return paired

    def openai_bare() -> object:
        return oai.chat.completions.create(model="gpt-fake", max_tokens=64, messages=user)

    def anthropic_bare() -> object:
        return ant.messages.create(model="claude-fake", max_tokens=64, messages=user)

    paths: dict[str, Sync] = {
        "openai bare": openai_bare,
        "openai guarded": lambda: g_oai.chat.completions.create(
            model="gpt-fake", max_tokens=64, messages=user
        ),
        "openai by hand": openai_by_hand,
        "openai inside an http.client pair": in_pair(openai_bare),
        "anthropic bare": anthropic_bare,
        "anthropic guarded": lambda: g_ant.messages.create(
            model="claude-fake", max_tokens=64, messages=user
        ),
        "anthropic inside an http.client pair": in_pair(anthropic_bare),
    }
    if importlib.util.find_spec("langchain_openai") is not None:
        # Imported by name: LangChain needs CPython 3.11+, and the bench is type-checked on 3.10.
        chat_openai: Any = importlib.import_module("langchain_openai").ChatOpenAI
        guard_langchain: Any = importlib.import_module("cycles.integrations.langchain").guard
        chat = chat_openai(
            model="gpt-fake",
            base_url=f"{provider}/v1",
            api_key=lambda: "sk-fake",
            max_retries=0,
            max_tokens=64,
        )
        g_chat = guard_langchain(chat, cycles=c, pricing=PRICING)
        paths["langchain bare"] = lambda: chat.invoke(PROMPT)
        paths["langchain guarded"] = lambda: g_chat.invoke(PROMPT)
        paths["langchain inside an http.client pair"] = in_pair(paths["langchain bare"])
    if importlib.util.find_spec("agents") is not None:
        from agents import Agent, ModelSettings, OpenAIResponsesModel, RunConfig, Runner

        from cycles.integrations.openai_agents import guard as guard_agents

        aoai = openai.AsyncOpenAI(base_url=f"{provider}/v1", api_key="sk-fake", max_retries=0)
        model = OpenAIResponsesModel(model="gpt-fake", openai_client=aoai)
        config = RunConfig(tracing_disabled=True)
        settings = ModelSettings(max_tokens=64)
        bare_agent = Agent(name="a", instructions="Be terse.", model=model, model_settings=settings)
        g_agent = Agent(
            name="a",
            instructions="Be terse.",
            model=guard_agents(model, cycles=ac, pricing=PRICING),
            model_settings=settings,
        )
        paths["agents bare"] = on_loop(lambda: Runner.run(bare_agent, PROMPT, run_config=config))
        paths["agents guarded"] = on_loop(lambda: Runner.run(g_agent, PROMPT, run_config=config))
        # The sync http.client pair around the run (blocking calls outside the loop's turns).
        paths["agents inside an http.client pair"] = in_pair(paths["agents bare"])
    paths["sdk create + commit"] = sdk_pair
    paths["sdk async create + commit"] = on_loop(sdk_async_pair)
    paths["http.client create + commit"] = bare_pair
    paths["sdk lifecycle"] = lifecycle
    paths["sdk async lifecycle"] = on_loop(async_lifecycle)
    return paths


def _round(fn: Sync, calls: int) -> float:
    t = time.process_time()
    for _ in range(calls):
        fn()
    return (time.process_time() - t) / calls * 1e6


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cycles-bin", required=True, help="the cycles CLI (serve, fake-provider)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--calls", type=int, default=200)
    p.add_argument(
        "--journal",
        choices=("on", "off"),
        default="off",
        help="the guarded calls' crash journal (default off, as the Node benchmark)",
    )
    p.add_argument("--json", help="also write the figures here")
    p.add_argument(
        "--only",
        metavar="PATH",
        help="run this one path: --calls warm-up calls, then --rounds x --calls calls, and "
        "print nothing (integrations_instructions.py counts its instructions under callgrind)",
    )
    p.add_argument(
        "--paths",
        metavar="A,B",
        help="measure only these paths (comma-separated names of the table's first column); "
        "the ratios of a path left out are not printed",
    )
    a = p.parse_args()

    server = lb.Server(a.cycles_bin)
    provider = FakeProviderProcess(a.cycles_bin)
    loop = asyncio.new_event_loop()
    samples: dict[str, list[float]] = {}
    try:
        paths = _paths(server.url, provider.url, loop, a.journal == "on")
        if a.paths is not None:
            wanted = [k.strip() for k in a.paths.split(",") if k.strip()]
            unknown = [k for k in wanted if k not in paths]
            if unknown:
                raise SystemExit(f"--paths {unknown!r}: not among {sorted(paths)}")
            paths = {k: paths[k] for k in wanted}
        if a.only is not None:
            if a.only not in paths:
                raise SystemExit(f"--only {a.only!r}: not one of {sorted(paths)}")
            fn = paths[a.only]
            for _ in range(a.calls + a.rounds * a.calls):
                fn()
            return
        for fn in paths.values():
            _round(fn, a.calls)  # warm-up
        samples = {k: [] for k in paths}
        for r in range(a.rounds):
            print(f"== round {r + 1} of {a.rounds}", file=sys.stderr)
            for k, fn in paths.items():
                samples[k].append(_round(fn, a.calls))
        _, reserved = server.spent_reserved()
        if reserved != 0:
            raise SystemExit(f"{reserved} still reserved after the run: a call was not settled")
    finally:
        loop.close()
        provider.stop()
        server.stop()

    m = {k: statistics.median(v) for k, v in samples.items()}
    out: dict[str, Any] = {
        "rounds": a.rounds,
        "calls": a.calls,
        "journal": a.journal,
        "python": sys.version.split()[0],
        "us_per_call": m,
        "libs": {},
    }
    py = sys.version.split()[0]
    print(
        f"Client CPU per call, median of {a.rounds} rounds of {a.calls} calls "
        f"(time.process_time(); Python {py}; journal {a.journal}):\n"
    )
    print("| path | µs CPU per call | rounds (µs) |")
    print("|---|---:|---|")
    for k, v in m.items():
        print(f"| {k} | {v:.0f} | {', '.join(f'{x:.0f}' for x in samples[k])} |")
    print(
        "\n| integration | bare µs | guarded µs | guarded / bare | added µs | added / SDK pair "
        "| added / http.client pair | added / http.client pair in place "
        "| added beyond the lifecycle µs |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for lib in ("openai", "anthropic", "langchain", "agents"):
        # The agents path guards with the async client: its yardsticks are the async ones.
        prefix = "sdk async" if lib == "agents" else "sdk"
        need = (
            f"{lib} bare",
            f"{lib} guarded",
            f"{prefix} create + commit",
            f"{prefix} lifecycle",
            "http.client create + commit",
        )
        if any(k not in m for k in need):
            continue
        bare, guarded = m[f"{lib} bare"], m[f"{lib} guarded"]
        added = guarded - bare
        pair, life = m[f"{prefix} create + commit"], m[f"{prefix} lifecycle"]
        raw = m["http.client create + commit"]
        # The goal's yardstick: the same pair around the same bare call (None: not measured).
        in_place = m.get(f"{lib} inside an http.client pair")
        per_in_place = None if in_place is None else added / (in_place - bare)
        out["libs"][lib] = {
            "bare": bare,
            "guarded": guarded,
            "added": added,
            "added_per_sdk_pair": added / pair,
            "added_per_http_client_pair": added / raw,
            "added_per_http_client_pair_in_place": per_in_place,
            "added_beyond_lifecycle": added - life,
        }
        shown = "-" if per_in_place is None else f"{per_in_place:.2f}x"
        print(
            f"| {lib} | {bare:.0f} | {guarded:.0f} | {guarded / bare:.2f}x | {added:.0f} | "
            f"{added / pair:.2f}x | {added / raw:.2f}x | {shown} | {added - life:.0f} |"
        )
    out["rounds_us"] = samples
    goal = ("openai bare", "openai guarded", "openai by hand", "openai inside an http.client pair")
    if all(k in m for k in goal):
        _goal(out, samples)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=2)


def _goal(out: dict[str, Any], samples: dict[str, list[float]]) -> None:
    """The goal's figures: what the openai guard, the lifecycle by hand and an http.client
    pair add to the bare call, from the medians and from each round's own differences (the
    paths of a round run seconds apart, so a round's differences move less than its
    figures)."""
    m = {k: statistics.median(v) for k, v in samples.items()}
    bare = samples["openai bare"]

    def per_round(path: str) -> list[float]:
        return [x - b for x, b in zip(samples[path], bare, strict=True)]

    guard = per_round("openai guarded")
    hand = per_round("openai by hand")
    pair = per_round("openai inside an http.client pair")
    own = m["openai guarded"] - m["openai by hand"]
    in_place = m["openai inside an http.client pair"] - m["openai bare"]
    added = m["openai guarded"] - m["openai bare"]
    ratios = sorted(g / p for g, p in zip(guard, pair, strict=True) if p > 0)
    out["openai_guard_beyond_by_hand"] = own
    out["http_client_pair_in_place"] = in_place
    out["openai_added_per_pair_in_place"] = added / in_place
    out["paired"] = {
        "guard_adds": statistics.median(guard),
        "by_hand_adds": statistics.median(hand),
        "pair_adds": statistics.median(pair),
        "guard_beyond_by_hand": statistics.median(g - h for g, h in zip(guard, hand, strict=True)),
        "guard_per_pair_ratio_quartiles": statistics.quantiles(ratios, n=4)
        if len(ratios) >= 2
        else ratios,
    }
    pr = out["paired"]
    print(
        f"\nan http.client create + commit around the bare openai call adds {in_place:.0f} µs; "
        f"the openai guard adds {added:.0f} µs: {added / in_place:.2f}x that pair in place"
    )
    print(
        f"paired rounds (medians of each round's differences): the guard adds "
        f"{pr['guard_adds']:.0f} µs, the lifecycle by hand {pr['by_hand_adds']:.0f}, the pair "
        f"{pr['pair_adds']:.0f}: guard {pr['guard_adds'] / pr['pair_adds']:.2f}x the pair, by "
        f"hand {pr['by_hand_adds'] / pr['pair_adds']:.2f}x; the guard beyond by hand "
        f"{pr['guard_beyond_by_hand']:.0f} µs; quartiles of the rounds' guard / pair: "
        + ", ".join(f"{q:.2f}x" for q in pr["guard_per_pair_ratio_quartiles"])
    )
    print(f"openai guarded against the same call guarded by hand: {own:.0f} µs per call")


if __name__ == "__main__":
    main()
