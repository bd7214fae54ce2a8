"""The integrations' ``tokenizer=``: tiktoken counts the prompt's texts when it is installed
and its encoding loads, core's estimate applies otherwise, and a counter of your own replaces
both; core adds the framing in every case (cycles.integrations.tokenizer).

The tiktoken cases run in child processes: each loads (or fails to load) its encoding once
per process, which is what is tested. tiktoken reads ``o200k_base`` from
``CYCLES_TIKTOKEN_CACHE``, a directory python/scripts/test.sh fills with the encoding file
(tiktoken checks its published SHA-256 on reading it). Every count below is by hand:

- system "internationalization": core ceil(20 / 4) = 5, o200k_base 2 tokens;
- user "日本語のテキスト": core ceil(8 / 4) = 2, o200k_base 6 tokens;
- so core's estimate is (4 + 5) + (4 + 2) = 15, tiktoken's (4 + 2) + (4 + 6) = 16.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import openai
import pytest
from integration_support import ledger, oai

import cycles
from cycles.integrations.openai import guard
from cycles.testing import FakeProvider, LocalServer

SYSTEM = "internationalization"
USER = "日本語のテキスト"
BOUND = 50
CORE_PROMPT = (4 + 5) + (4 + 2)
TIKTOKEN_PROMPT = (4 + 2) + (4 + 6)

# One guarded call of gpt-4o-mini (o200k_base) with the default tokenizer="auto", twice; the
# reserved estimates are printed as JSON.
CHILD = f"""
import json, openai
from cycles.integrations.openai import guard
from cycles.testing import Budget, FakeProvider, LocalServer

with LocalServer(budgets=[Budget("tenant:acme", "TOKENS", 100_000)]) as s, FakeProvider() as p:
    with s.client() as c:
        llm = guard(openai.OpenAI(base_url=p.openai_base_url, api_key="k", max_retries=0), cycles=c)
        for _ in range(2):
            llm.chat.completions.create(
                model="gpt-4o-mini",
                max_tokens={BOUND},
                messages=[{{"role": "system", "content": {SYSTEM!r}}},
                          {{"role": "user", "content": {USER!r}}}],
            )
    print(json.dumps([e.amount for e in s.ledger() if e.kind == "reserve"]))
"""


def run_child(env: dict[str, str]) -> tuple[list[int], str]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    reserved: list[int] = json.loads(out.stdout.strip().splitlines()[-1])
    return reserved, out.stderr


def test_auto_counts_with_tiktoken_when_its_encoding_loads() -> None:
    cache = os.environ.get("CYCLES_TIKTOKEN_CACHE")
    assert cache, "CYCLES_TIKTOKEN_CACHE is unset: run through python/scripts/test.sh"
    assert (Path(cache) / "fb374d419588a4632f3f557e76b4b70aebbca790").is_file()
    reserved, stderr = run_child({"TIKTOKEN_CACHE_DIR": cache})
    assert reserved == [TIKTOKEN_PROMPT + BOUND] * 2
    assert "tiktoken" not in stderr


def test_auto_falls_back_to_core_when_the_encoding_cannot_load(tmp_path: Path) -> None:
    # An empty cache and a proxy that refuses every connection: tiktoken's download fails
    # (for real, wherever the test runs); the loopback calls bypass the proxy.
    reserved, stderr = run_child(
        {
            "TIKTOKEN_CACHE_DIR": str(tmp_path),
            "HTTPS_PROXY": "http://127.0.0.1:9",
            "https_proxy": "http://127.0.0.1:9",
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }
    )
    assert reserved == [CORE_PROMPT + BOUND] * 2
    # One warning for the process, not one per call.
    assert stderr.count("tiktoken cannot load the o200k_base encoding") == 1, stderr


def call(llm: openai.OpenAI, model: str = "gpt-fake") -> None:
    llm.chat.completions.create(
        model=model,
        max_tokens=BOUND,
        messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}],
    )


def test_a_counter_of_your_own_counts_every_text(
    provider: FakeProvider, local: LocalServer
) -> None:
    seen: list[str] = []

    def chars(text: str) -> int:
        seen.append(text)
        return len(text)

    with local.client() as c:
        call(guard(oai(provider), cycles=c, tokenizer=chars))
    assert seen == [SYSTEM, USER]
    assert ledger(local)[0] == ("reserve", (4 + 20) + (4 + 8) + BOUND)


def test_a_model_tiktoken_does_not_know_and_none_use_core(
    provider: FakeProvider, local: LocalServer
) -> None:
    with local.client() as c:
        call(guard(oai(provider), cycles=c), model="claude-fake")
        call(guard(oai(provider), cycles=c, tokenizer=None), model="gpt-4o-mini")
    reserves = [a for k, a in ledger(local) if k == "reserve"]
    assert reserves == [CORE_PROMPT + BOUND] * 2


def test_a_bad_tokenizer_is_refused_before_anything_is_reserved(
    provider: FakeProvider, local: LocalServer
) -> None:
    with local.client() as c:
        with pytest.raises(cycles.InvalidArgumentError, match="tokenizer= must be"):
            guard(oai(provider), cycles=c, tokenizer="tiktoken")  # type: ignore[arg-type]
        llm = guard(oai(provider), cycles=c, tokenizer=lambda t: -1)
        with pytest.raises(cycles.InvalidArgumentError, match="returned -1 for a text"):
            call(llm)
    assert ledger(local) == []
    assert provider.requests() == []
