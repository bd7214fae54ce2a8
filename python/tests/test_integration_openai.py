"""``cycles.integrations.openai`` with the real ``openai`` package (the version
python/scripts/test.sh pins) against the fake provider and the local Cycles server over real
HTTP: every charge below is computed by hand (integration_support's docstring), and the
ledger shows each reservation settled exactly once."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

import openai
import pytest
from integration_support import (
    ESTIMATED_PROMPT,
    PROMPT,
    PROVIDER_INPUT,
    REPLY_TOKENS,
    Events,
    aoai,
    ledger,
    oai,
    reserve_bodies,
    server,
    settled_once,
)
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolParam

import cycles
from cycles.integrations import CallNotSentError, CallOptions, per_call
from cycles.integrations.openai import guard
from cycles.models import Caps, Subject
from cycles.testing import FakeProvider, LocalServer

CHAT: list[ChatCompletionMessageParam] = [{"role": "user", "content": PROMPT}]
#: 58: core's prompt estimate plus the output bound 50.
RESERVED = ESTIMATED_PROMPT + 50
COMMITTED = PROVIDER_INPUT + REPLY_TOKENS


def test_chat_completion_reserves_then_commits_the_usage(
    provider: FakeProvider, local: LocalServer
) -> None:
    plain = oai(provider)
    with local.client() as c:
        llm = guard(plain, cycles=c)
        assert llm is not plain and plain.chat.completions.create != llm.chat.completions.create
        r = llm.chat.completions.create(model="gpt-fake", max_tokens=50, messages=CHAT)
        assert r.usage is not None and r.usage.completion_tokens == REPLY_TOKENS
    assert ledger(local) == [("reserve", RESERVED), ("commit", COMMITTED)]
    (body,) = reserve_bodies(local)
    assert body["action"] == {"kind": "llm.completion", "name": "gpt-fake"}
    assert body["subject"] == {"tenant": "acme"}
    assert body["estimate"] == {"unit": "TOKENS", "amount": RESERVED}
    assert provider.requests()[0].output_bound == 50


def test_chat_stream_asks_for_usage_and_holds_the_reservation(
    provider: FakeProvider, local: LocalServer
) -> None:
    with local.client() as c:
        llm = guard(oai(provider), cycles=c)
        stream = llm.chat.completions.create(
            model="gpt-fake", max_tokens=50, messages=CHAT, stream=True
        )
        assert isinstance(stream, openai.Stream)
        first = next(stream)
        assert first.choices and ledger(local) == [("reserve", RESERVED)], "held while streaming"
        rest = list(stream)
    last = rest[-1]
    assert last.choices == [] and last.usage is not None, "the final usage chunk"
    assert ledger(local) == [("reserve", RESERVED), ("commit", COMMITTED)]
    sent = provider.requests()[0].body
    assert sent["stream_options"] == {"include_usage": True}


def test_a_guarded_calls_settlement_is_readable_from_its_handle(
    provider: FakeProvider, local: LocalServer
) -> None:
    # The guard never reads the settlement: core's report hands its body over on first read
    # (NativeFinished.settlement_body). Whoever holds the handle (current_reservation() inside
    # the call) still reads all of it: the commit's charge and the server's whole response.
    with local.client() as c:
        llm = guard(oai(provider), cycles=c)
        stream = llm.chat.completions.create(
            model="gpt-fake", max_tokens=50, messages=CHAT, stream=True
        )
        handle = cycles.current_reservation()
        assert handle is not None and handle.settlement_or_none is None
        list(stream)
    assert handle.outcome == "settled" and cycles.current_reservation() is None
    s = handle.settlement
    assert s.status == cycles.SettlementStatus.COMMITTED
    assert s.charged == cycles.Amount("TOKENS", COMMITTED)
    assert s.body is not None and s.body["status"] == "COMMITTED"
    assert s.body["charged"] == {"unit": "TOKENS", "amount": COMMITTED}
    assert [b["scope"] for b in s.body["balances"]] == ["tenant:acme"]
    assert handle.lease is not None and handle.lease.end == "finished"


def test_chat_stream_without_usage_commits_the_estimate(
    provider: FakeProvider, local: LocalServer
) -> None:
    with local.client() as c:
        llm = guard(oai(provider), cycles=c)
        with llm.chat.completions.create(
            model="gpt-fake",
            max_tokens=50,
            messages=CHAT,
            stream=True,
            stream_options={"include_usage": False},
        ) as stream:
            assert all(chunk.usage is None for chunk in stream)
        off = guard(oai(provider), cycles=c, include_usage=False)
        for _ in off.chat.completions.create(
            model="gpt-fake", max_tokens=50, messages=CHAT, stream=True
        ):
            pass
    assert ledger(local) == [("reserve", RESERVED), ("commit", RESERVED)] * 2
    assert [q.body.get("stream_options") for q in provider.requests()] == [
        {"include_usage": False},
        None,
    ]


def test_the_callers_own_raw_response_is_guarded_and_returned_raw(
    provider: FakeProvider, local: LocalServer
) -> None:
    # A call that does not stream goes out through the library's raw sender (core reads the
    # body as sent); the caller's own with_raw_response on the guarded copy is guarded too,
    # and gets the raw response back, its usage read from its body.
    with local.client() as c:
        llm = guard(oai(provider), cycles=c)
        raw = llm.chat.completions.with_raw_response.create(
            model="gpt-fake", max_tokens=50, messages=CHAT
        )
        assert not isinstance(raw, openai.types.chat.ChatCompletion)
        reply = raw.parse()
        assert reply.usage is not None and reply.usage.completion_tokens == REPLY_TOKENS
        r = llm.responses.with_raw_response.create(
            model="gpt-fake", instructions="Be terse.", input="say hello", max_output_tokens=20
        )
        assert r.parse().output_text.startswith("This is")
    assert ledger(local) == [
        ("reserve", RESERVED),
        ("commit", COMMITTED),
        ("reserve", 34),
        ("commit", 13),
    ]


async def test_async_raw_responses_are_guarded(provider: FakeProvider, local: LocalServer) -> None:
    c = local.async_client()
    try:
        llm = guard(aoai(provider), cycles=c)
        reply = await llm.chat.completions.create(model="gpt-fake", max_tokens=50, messages=CHAT)
        assert isinstance(reply, openai.types.chat.ChatCompletion)
        raw = await llm.chat.completions.with_raw_response.create(
            model="gpt-fake", max_tokens=50, messages=CHAT
        )
        usage = raw.parse().usage
        assert usage is not None and usage.completion_tokens == REPLY_TOKENS
    finally:
        await c.aclose()
    assert ledger(local) == [("reserve", RESERVED), ("commit", COMMITTED)] * 2


def test_a_pricing_that_is_not_json_is_refused_when_guarding(provider: FakeProvider) -> None:
    # The pricing is encoded once, when the client is guarded.
    bad: Any = {"unit": "USD_MICROCENTS", "models": {"gpt-fake": object()}}
    with LocalServer() as local, local.client() as c:
        with pytest.raises(cycles.InvalidArgumentError, match="pricing="):
            guard(oai(provider), cycles=c, pricing=bad)
    assert provider.requests() == []


def test_responses_whole_and_streamed(provider: FakeProvider, local: LocalServer) -> None:
    # Core's estimate: instructions 4 + ceil(9/4) = 7, input 4 + ceil(9/4) = 7, bound 20.
    # The provider: 4 words in, 9 out.
    with local.client() as c:
        llm = guard(oai(provider), cycles=c)
        r = llm.responses.create(
            model="gpt-fake", instructions="Be terse.", input="say hello", max_output_tokens=20
        )
        assert r.output_text.startswith("This is")
        events = list(
            llm.responses.create(
                model="gpt-fake",
                instructions="Be terse.",
                input="say hello",
                max_output_tokens=20,
                stream=True,
            )
        )
        assert events[-1].type == "response.completed"
    assert ledger(local) == [("reserve", 34), ("commit", 13)] * 2
    assert "stream_options" not in provider.requests()[1].body


def test_provider_error_releases(provider: FakeProvider, local: LocalServer) -> None:
    provider.add_fault({"times": 2, "fault": {"kind": "server_error"}})
    with local.client() as c:
        llm = guard(oai(provider), cycles=c)
        with pytest.raises(openai.InternalServerError):
            llm.chat.completions.create(model="gpt-fake", max_tokens=50, messages=CHAT)
        with pytest.raises(openai.InternalServerError):
            llm.responses.create(model="gpt-fake", input="x", max_output_tokens=16, stream=True)
    assert ledger(local) == [
        ("reserve", RESERVED),
        ("release", RESERVED),
        ("reserve", 21),
        ("release", 21),
    ]


def test_cut_stream_before_any_usage_is_released(
    provider: FakeProvider, local: LocalServer
) -> None:
    provider.add_fault({"times": 2, "fault": {"kind": "cut_stream", "after_chunks": 3}})
    with local.client() as c:
        llm = guard(oai(provider), cycles=c)
        got = []
        with pytest.raises(openai.APIConnectionError):
            for chunk in llm.chat.completions.create(
                model="gpt-fake", max_tokens=50, messages=CHAT, stream=True
            ):
                got.append(chunk)
        assert len(got) == 3
        with pytest.raises(openai.APIConnectionError):
            list(llm.responses.create(model="m", input="x", max_output_tokens=16, stream=True))
    # Chat Completions and Responses report usage only at the end: nothing to commit.
    assert ledger(local) == [
        ("reserve", RESERVED),
        ("release", RESERVED),
        ("reserve", 21),
        ("release", 21),
    ]


def test_responses_error_event_settles_as_failed_and_releases(
    provider: FakeProvider, local: LocalServer
) -> None:
    # The library yields the provider's error as an event and ends the stream normally; core's
    # call_failed says the call failed, and without usage a failed call is released.
    provider.add_fault({"fault": {"kind": "stream_error", "after_chunks": 2}})
    with local.client() as c:
        llm = guard(oai(provider), cycles=c)
        events = list(llm.responses.create(model="m", input="x", max_output_tokens=16, stream=True))
    assert events[-1].type == "error"
    assert ledger(local) == [("reserve", 21), ("release", 21)]


def test_a_responses_cap_below_16_is_not_sent(provider: FakeProvider) -> None:
    # Responses refuses max_output_tokens below 16, and sending 16 would overspend the cap.
    with server(caps=Caps(max_tokens=10)) as local, local.client() as c:
        llm = guard(oai(provider), cycles=c)
        with pytest.raises(CallNotSentError) as e:
            llm.responses.create(model="m", input="x", max_output_tokens=100)
        assert e.value.released and e.value.plan is not None and e.value.plan.bound_to == 10
        assert "not sent" in str(e.value)
        assert [k for k, _ in ledger(local)] == ["reserve", "release"]
    assert provider.requests() == []


def test_a_stream_closed_early_commits_the_estimate(
    provider: FakeProvider, local: LocalServer
) -> None:
    with local.client() as c:
        llm = guard(oai(provider), cycles=c)
        with llm.chat.completions.create(
            model="gpt-fake", max_tokens=50, messages=CHAT, stream=True
        ) as stream:
            for _ in stream:
                break
        assert ledger(local) == [("reserve", RESERVED), ("commit", RESERVED)]
        stream.close()  # settled once
    settled_once(local)


def test_caps_lower_the_output_bound(provider: FakeProvider) -> None:
    events = Events()
    with server(caps=Caps(max_tokens=3)) as local, local.client(on_event=events) as c:
        llm = guard(oai(provider), cycles=c, default_output_bound=40)
        r = llm.chat.completions.create(model="gpt-fake", max_tokens=50, messages=CHAT)
        assert r.choices[0].finish_reason == "length"
        # No bound in the request: the default (40) is reserved, the cap is sent as
        # max_completion_tokens.
        llm.chat.completions.create(model="gpt-fake", messages=CHAT)
        applied = events.wait("caps_applied", 2)
        assert ledger(local) == [
            ("reserve", RESERVED),
            ("commit", PROVIDER_INPUT + 3),
            ("reserve", ESTIMATED_PROMPT + 40),
            ("commit", PROVIDER_INPUT + 3),
        ]
    with server(caps=Caps(max_tokens=16)) as local, local.client(on_event=events) as c:
        # Responses refuses a max_output_tokens below 16 (as OpenAI does): a cap of 16.
        llm = guard(oai(provider), cycles=c)
        llm.responses.create(model="gpt-fake", input="say hello", max_output_tokens=20)
        applied = events.wait("caps_applied", 3)
        assert ledger(local) == [("reserve", 7 + 20), ("commit", 2 + 9)]
    seen = provider.requests()
    assert [q.output_bound for q in seen] == [3, 3, 16]
    assert seen[0].body["max_tokens"] == 3 and "max_completion_tokens" not in seen[0].body
    assert seen[1].body["max_completion_tokens"] == 3
    assert seen[2].body["max_output_tokens"] == 16
    assert [(e.fields["api"], e.fields["bound_from"], e.fields["bound_to"]) for e in applied] == [
        ("chat_completions", 50, 3),
        ("chat_completions", None, 3),
        ("responses", 20, 16),
    ]


def _tool(name: str) -> ChatCompletionToolParam:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}


def test_caps_filter_the_tools(provider: FakeProvider) -> None:
    caps = Caps(tool_denylist=["shell"])
    with server(caps=caps) as local, local.client() as c:
        llm = guard(oai(provider), cycles=c)
        llm.chat.completions.create(
            model="gpt-fake",
            max_tokens=50,
            messages=CHAT,
            tools=[_tool("shell"), _tool("calc")],
            tool_choice={"type": "function", "function": {"name": "shell"}},
        )
        llm.chat.completions.create(
            model="gpt-fake",
            max_tokens=50,
            messages=CHAT,
            tools=[_tool("shell")],
            tool_choice="auto",
            parallel_tool_calls=True,
        )
        llm.responses.create(
            model="gpt-fake",
            input="x",
            max_output_tokens=16,
            tools=[
                {"type": "function", "name": "shell", "parameters": {}, "strict": True},
                {"type": "web_search"},
            ],
        )
        settled_once(local)
    first, every, responses = (q.body for q in provider.requests())
    assert [t["function"]["name"] for t in first["tools"]] == ["calc"]
    assert "tool_choice" not in first, "a tool_choice naming a removed tool is removed"
    assert "tools" not in every and "tool_choice" not in every
    assert "parallel_tool_calls" not in every
    assert responses["tools"] == [{"type": "web_search"}]


def test_a_denial_raises_and_the_provider_sees_nothing(provider: FakeProvider) -> None:
    with server(allocated=RESERVED - 1) as local, local.client() as c:
        llm = guard(oai(provider), cycles=c)
        with pytest.raises(cycles.BudgetExceededError):
            llm.chat.completions.create(model="gpt-fake", max_tokens=50, messages=CHAT)
        with pytest.raises(cycles.BudgetExceededError):
            llm.chat.completions.create(model="gpt-fake", max_tokens=50, messages=CHAT, stream=True)
        assert ledger(local) == []
    assert provider.requests() == []


def test_a_cap_of_zero_releases_and_sends_nothing(provider: FakeProvider) -> None:
    with server(caps=Caps(max_tokens=0)) as local, local.client() as c:
        llm = guard(oai(provider), cycles=c)
        with pytest.raises(CallNotSentError) as e:
            llm.chat.completions.create(model="gpt-fake", max_tokens=50, messages=CHAT)
        assert isinstance(e.value, cycles.BudgetExceededError)
        assert e.value.released and e.value.plan is not None and not e.value.plan.send
        assert (e.value.name, e.value.code, e.value.release_error) == ("BUDGET_EXCEEDED", 104, None)
        # Core's text, the same in every language.
        assert e.value.message == (
            "caps lower the output bound to 0, which chat_completions does not accept: the call "
            f"was not sent, nothing was charged to reservation {e.value.reservation_id}, and the "
            "reservation was released"
        )
        assert ledger(local) == [("reserve", RESERVED), ("release", RESERVED)]
    assert provider.requests() == []


def test_per_call_options_and_pricing(provider: FakeProvider) -> None:
    table: cycles.pricing.Pricing = {
        "unit": "USD_MICROCENTS",
        "models": {"gpt-fake": {"input_per_mtok": 1_000_000, "output_per_mtok": 2_000_000}},
    }
    with LocalServer() as local, local.client() as c:
        llm = guard(oai(provider), cycles=c, pricing=table, action_kind="llm.chat")
        llm.chat.completions.create(model="gpt-fake", max_tokens=50, messages=CHAT)
        llm.chat.completions.create(
            model="gpt-fake",
            max_tokens=50,
            messages=CHAT,
            **per_call(
                name="summarise",
                kind="llm.summary",
                subject=Subject(tenant="acme", app="notes"),
                estimate=500,
                idempotency_key="call-1",
            ),
        )
        untyped: Any = llm.chat.completions.create
        untyped(model="gpt-fake", max_tokens=50, messages=CHAT, cycles={"name": "n"})
        with pytest.raises(cycles.InvalidArgumentError, match="cycles="):
            untyped(model="gpt-fake", max_tokens=50, messages=CHAT, cycles=3)
        with pytest.raises(cycles.InvalidArgumentError, match="no price"):
            llm.chat.completions.create(model="unknown-model", max_tokens=5, messages=CHAT)
        with pytest.raises(cycles.InvalidArgumentError, match="output bound"):
            llm.chat.completions.create(model="gpt-fake", messages=CHAT)
        with pytest.raises(cycles.InvalidArgumentError, match="unit TOKENS differs from the"):
            llm.chat.completions.create(
                model="gpt-fake",
                max_tokens=5,
                messages=CHAT,
                **per_call(estimate=cycles.Amount("TOKENS", 5)),
            )
        exact = guard(oai(provider), cycles=c, pricing=table, prompt_tokens=lambda req: 1000)
        exact.chat.completions.create(
            model="gpt-fake", max_tokens=50, messages=CHAT, **per_call(name="exact")
        )
        # 8 x 1 + 50 x 2 = 108; commit 4 x 1 + 9 x 2 = 22. With 1000 prompt tokens: 1100.
        assert ledger(local) == [
            ("reserve", 108),
            ("commit", 22),
            ("reserve", 500),
            ("commit", 22),
            ("reserve", 108),
            ("commit", 22),
            ("reserve", 1100),
            ("commit", 22),
        ]
        bodies = reserve_bodies(local)
        assert bodies[0]["action"] == {"kind": "llm.chat", "name": "gpt-fake"}
        assert bodies[1]["action"] == {"kind": "llm.summary", "name": "summarise"}
        assert bodies[1]["subject"] == {"tenant": "acme", "app": "notes"}
        assert bodies[1]["idempotency_key"] == "call-1"
        assert bodies[2]["action"]["name"] == "n"
        assert len(provider.requests()) == 4, "the refused calls sent nothing"
        assert "cycles" not in provider.requests()[1].body
    assert CallOptions(name="x") == CallOptions("x")


async def test_fifty_concurrent_async_calls_each_settle_once(provider: FakeProvider) -> None:
    with server() as local:
        c = local.async_client()
        llm = guard(aoai(provider), cycles=c)

        async def one(i: int) -> int:
            if i % 2:
                stream = await llm.chat.completions.create(
                    model="gpt-fake", max_tokens=50, messages=CHAT, stream=True
                )
                chunks = [chunk async for chunk in stream]
                return len(chunks)
            r = await llm.responses.create(model="gpt-fake", input=PROMPT, max_output_tokens=160)
            return 0 if r.usage is None else r.usage.output_tokens

        got = await asyncio.gather(*(one(i) for i in range(50)))
        assert len(got) == 50
        await c.aclose()
        outcomes = settled_once(local)
        assert len(outcomes) == 50 and set(outcomes.values()) == {"commit"}
        # The responses input is one string message: 4 + ceil(15/4) = 8 as well.
        assert [a for k, a in ledger(local) if k == "commit"] == [COMMITTED] * 50
    assert len(provider.requests()) == 50


async def test_async_stream_cut_and_error(provider: FakeProvider) -> None:
    provider.add_fault({"call": 0, "fault": {"kind": "cut_stream", "after_chunks": 2}})
    provider.add_fault({"call": 1, "fault": {"kind": "server_error"}})
    with server() as local:
        c = local.async_client()
        llm = guard(aoai(provider), cycles=c)
        stream = await llm.chat.completions.create(
            model="gpt-fake", max_tokens=50, messages=CHAT, stream=True
        )
        with pytest.raises(openai.APIConnectionError):
            async for _ in stream:
                pass
        with pytest.raises(openai.InternalServerError):
            await llm.chat.completions.create(model="gpt-fake", max_tokens=50, messages=CHAT)
        async with await llm.chat.completions.create(
            model="gpt-fake", max_tokens=50, messages=CHAT, stream=True
        ) as s:
            async for _ in s:
                break
        await c.aclose()
        assert ledger(local) == [
            ("reserve", RESERVED),
            ("release", RESERVED),
            ("reserve", RESERVED),
            ("release", RESERVED),
            ("reserve", RESERVED),
            ("commit", RESERVED),
        ]


def test_missing_openai_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['openai'] = None\n"
        "try:\n"
        "    import cycles.integrations.openai\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "pip install 'cycles-sdk[openai]'" in out.stdout, out.stderr


def test_request_bodies_reach_the_provider_unchanged(provider: FakeProvider) -> None:
    with server() as local, local.client() as c:
        llm = guard(oai(provider), cycles=c)
        llm.chat.completions.create(
            model="gpt-fake",
            max_tokens=50,
            messages=iter(CHAT),
            temperature=0.5,
            extra_headers={"x-test": "1"},
        )
    (q,) = provider.requests()
    assert q.headers["x-test"] == "1"
    assert json.dumps(q.body, sort_keys=True) == json.dumps(
        {"model": "gpt-fake", "max_tokens": 50, "messages": CHAT, "temperature": 0.5},
        sort_keys=True,
    )
