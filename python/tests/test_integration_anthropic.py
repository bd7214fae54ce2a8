"""``cycles.integrations.anthropic`` with the real ``anthropic`` package (the version
python/scripts/test.sh pins) against the fake provider and the local Cycles server over real
HTTP: ``messages.create`` (whole and ``stream=True``) and ``messages.stream``, sync and
async. Charges by hand (integration_support): 58 reserved, 13 committed; a Messages stream
reports its input first (``message_start``: 4 tokens), so a stream cut after it commits 4."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import anthropic
import pytest
from anthropic.types import MessageParam, ToolParam
from integration_support import (
    ESTIMATED_PROMPT,
    PROMPT,
    PROVIDER_INPUT,
    REPLY_TOKENS,
    Events,
    ledger,
    reserve_bodies,
    server,
    settled_once,
)

import cycles
from cycles.integrations import CallNotSentError, per_call
from cycles.integrations.anthropic import guard
from cycles.models import Caps
from cycles.testing import FakeProvider, LocalServer

MSGS: list[MessageParam] = [{"role": "user", "content": PROMPT}]
RESERVED = ESTIMATED_PROMPT + 50
COMMITTED = PROVIDER_INPUT + REPLY_TOKENS


def ant(p: FakeProvider) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=p.base_url, api_key="sk-ant-fake", max_retries=0)


def aant(p: FakeProvider) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=p.base_url, api_key="sk-ant-fake", max_retries=0)


def _cut(e: BaseException) -> bool:
    # The Messages stream lets the transport's RemoteProtocolError through.
    return isinstance(e, anthropic.APIConnectionError) or type(e).__name__ == "RemoteProtocolError"


def test_create_whole_and_streamed(provider: FakeProvider, local: LocalServer) -> None:
    with local.client() as c:
        llm = guard(ant(provider), cycles=c)
        m = llm.messages.create(model="claude-fake", max_tokens=50, messages=MSGS)
        assert m.usage.output_tokens == REPLY_TOKENS
        stream = llm.messages.create(model="claude-fake", max_tokens=50, messages=MSGS, stream=True)
        assert isinstance(stream, anthropic.Stream)
        assert next(stream).type == "message_start"
        assert ledger(local) == [("reserve", RESERVED), ("commit", COMMITTED), ("reserve", 58)]
        types = [e.type for e in stream]
        assert types[-1] == "message_stop"
    assert ledger(local) == [("reserve", RESERVED), ("commit", COMMITTED)] * 2
    assert reserve_bodies(local)[0]["action"] == {"kind": "llm.completion", "name": "claude-fake"}


def test_the_callers_own_raw_response_is_guarded(
    provider: FakeProvider, local: LocalServer
) -> None:
    with local.client() as c:
        llm = guard(ant(provider), cycles=c)
        raw = llm.messages.with_raw_response.create(
            model="claude-fake", max_tokens=50, messages=MSGS
        )
        assert raw.parse().usage.output_tokens == REPLY_TOKENS
    assert ledger(local) == [("reserve", RESERVED), ("commit", COMMITTED)]


def test_messages_stream_helper(provider: FakeProvider, local: LocalServer) -> None:
    with local.client() as c:
        llm = guard(ant(provider), cycles=c)
        manager = llm.messages.stream(model="claude-fake", max_tokens=50, messages=MSGS)
        assert ledger(local) == [], "reserved when the block is entered"
        with manager as s:
            assert ledger(local) == [("reserve", RESERVED)]
            text = "".join(s.text_stream)
            final = s.get_final_message()
        assert text.startswith("This is") and final.usage.output_tokens == REPLY_TOKENS
        with llm.messages.stream(
            model="claude-fake", max_tokens=50, messages=MSGS, **per_call(name="summary")
        ) as s:
            s.until_done()
        assert ledger(local) == [("reserve", RESERVED), ("commit", COMMITTED)] * 2
    assert reserve_bodies(local)[1]["action"]["name"] == "summary"
    assert all(q.stream for q in provider.requests())


def test_provider_error_releases(provider: FakeProvider, local: LocalServer) -> None:
    provider.add_fault({"times": 2, "fault": {"kind": "server_error"}})
    with local.client() as c:
        llm = guard(ant(provider), cycles=c)
        with pytest.raises(anthropic.InternalServerError):
            llm.messages.create(model="claude-fake", max_tokens=50, messages=MSGS)
        with pytest.raises(anthropic.InternalServerError):
            with llm.messages.stream(model="claude-fake", max_tokens=50, messages=MSGS) as s:
                s.until_done()
        assert ledger(local) == [("reserve", RESERVED), ("release", RESERVED)] * 2


def test_a_cut_stream_commits_the_input_it_reported(
    provider: FakeProvider, local: LocalServer
) -> None:
    provider.add_fault({"times": 2, "fault": {"kind": "cut_stream", "after_chunks": 2}})
    with local.client() as c:
        llm = guard(ant(provider), cycles=c)
        with pytest.raises(Exception) as e:
            with llm.messages.stream(model="claude-fake", max_tokens=50, messages=MSGS) as s:
                s.until_done()
        assert _cut(e.value), repr(e.value)
        with pytest.raises(Exception) as e:
            list(llm.messages.create(model="c", max_tokens=50, messages=MSGS, stream=True))
        assert _cut(e.value), repr(e.value)
        # message_start reported 4 input tokens, nothing of the output.
        assert ledger(local) == [("reserve", RESERVED), ("commit", PROVIDER_INPUT)] * 2


def test_an_error_event_mid_stream_commits_the_partial_usage(
    provider: FakeProvider, local: LocalServer
) -> None:
    provider.add_fault({"fault": {"kind": "stream_error", "after_chunks": 3}})
    with local.client() as c:
        llm = guard(ant(provider), cycles=c)
        with pytest.raises(anthropic.APIStatusError, match="overloaded_error"):
            with llm.messages.stream(model="claude-fake", max_tokens=50, messages=MSGS) as s:
                s.get_final_message()
        assert ledger(local) == [("reserve", RESERVED), ("commit", PROVIDER_INPUT)]


def test_the_block_raising_or_leaving_early(provider: FakeProvider, local: LocalServer) -> None:
    with local.client() as c:
        llm = guard(ant(provider), cycles=c)
        with pytest.raises(KeyError):
            with llm.messages.stream(model="claude-fake", max_tokens=50, messages=MSGS) as s:
                next(iter(s.text_stream))
                raise KeyError("the caller's own error")
        # Left after the first text: the input reported so far.
        with llm.messages.stream(model="claude-fake", max_tokens=50, messages=MSGS) as s:
            next(iter(s.text_stream))
        # Never read: no usage at all, a call that did not fail commits the estimate.
        with llm.messages.stream(model="claude-fake", max_tokens=50, messages=MSGS):
            pass
        assert ledger(local) == [
            ("reserve", RESERVED),
            ("commit", PROVIDER_INPUT),
            ("reserve", RESERVED),
            ("commit", PROVIDER_INPUT),
            ("reserve", RESERVED),
            ("commit", RESERVED),
        ]
        settled_once(local)


def test_caps_lower_max_tokens_and_filter_tools(provider: FakeProvider) -> None:
    events = Events()
    tools: list[ToolParam] = [
        {"name": "shell", "input_schema": {"type": "object"}},
        {"name": "calc", "input_schema": {"type": "object"}},
    ]
    caps = Caps(max_tokens=3, tool_allowlist=["calc"])
    with server(caps=caps) as local, local.client(on_event=events) as c:
        llm = guard(ant(provider), cycles=c)
        m = llm.messages.create(
            model="claude-fake",
            max_tokens=50,
            messages=MSGS,
            tools=tools,
            tool_choice={"type": "tool", "name": "shell"},
        )
        assert m.stop_reason == "max_tokens"
        with llm.messages.stream(model="claude-fake", max_tokens=50, messages=MSGS) as s:
            assert "".join(s.text_stream) == "This is a"
        applied = events.wait("caps_applied", 2)
        assert ledger(local) == [("reserve", RESERVED), ("commit", PROVIDER_INPUT + 3)] * 2
    first, second = provider.requests()
    assert [q.output_bound for q in (first, second)] == [3, 3]
    assert first.body["tools"] == [tools[1]] and "tool_choice" not in first.body
    assert applied[0].fields["removed_tools"] == ["shell"]
    assert (applied[1].fields["bound_from"], applied[1].fields["bound_to"]) == (50, 3)


def test_denial_and_a_cap_of_zero_send_nothing(provider: FakeProvider) -> None:
    with server(allocated=RESERVED - 1) as local, local.client() as c:
        llm = guard(ant(provider), cycles=c)
        with pytest.raises(cycles.BudgetExceededError):
            llm.messages.create(model="claude-fake", max_tokens=50, messages=MSGS)
        with pytest.raises(cycles.BudgetExceededError):
            with llm.messages.stream(model="claude-fake", max_tokens=50, messages=MSGS):
                pass
        assert ledger(local) == []
    with server(caps=Caps(max_tokens=0)) as local, local.client() as c:
        llm = guard(ant(provider), cycles=c)
        with pytest.raises(CallNotSentError):
            with llm.messages.stream(model="claude-fake", max_tokens=50, messages=MSGS):
                pass
        assert ledger(local) == [("reserve", RESERVED), ("release", RESERVED)]
    assert provider.requests() == []


async def test_fifty_concurrent_async_calls_each_settle_once(provider: FakeProvider) -> None:
    with server() as local:
        c = local.async_client()
        llm = guard(aant(provider), cycles=c)

        async def one(i: int) -> int:
            if i % 3 == 0:
                async with llm.messages.stream(
                    model="claude-fake", max_tokens=50, messages=MSGS
                ) as s:
                    final = await s.get_final_message()
                    return final.usage.output_tokens
            if i % 3 == 1:
                stream = await llm.messages.create(
                    model="claude-fake", max_tokens=50, messages=MSGS, stream=True
                )
                return len([e async for e in stream])
            m = await llm.messages.create(model="claude-fake", max_tokens=50, messages=MSGS)
            return m.usage.output_tokens

        got = await asyncio.gather(*(one(i) for i in range(50)))
        assert len(got) == 50
        await c.aclose()
        outcomes = settled_once(local)
        assert len(outcomes) == 50 and set(outcomes.values()) == {"commit"}
        assert [a for k, a in ledger(local) if k == "commit"] == [COMMITTED] * 50
    assert len(provider.requests()) == 50


async def test_async_stream_cut_error_and_denial(provider: FakeProvider) -> None:
    provider.add_fault({"call": 0, "fault": {"kind": "cut_stream", "after_chunks": 2}})
    provider.add_fault({"call": 1, "fault": {"kind": "server_error"}})
    with server() as local:
        c = local.async_client()
        llm = guard(aant(provider), cycles=c)
        with pytest.raises(Exception) as e:
            async with llm.messages.stream(model="c", max_tokens=50, messages=MSGS) as s:
                await s.until_done()
        assert _cut(e.value), repr(e.value)
        with pytest.raises(anthropic.InternalServerError):
            async with llm.messages.stream(model="c", max_tokens=50, messages=MSGS) as s:
                await s.until_done()
        with pytest.raises(cycles.BudgetExceededError):
            await llm.messages.create(model="c", max_tokens=10**9, messages=MSGS)
        await c.aclose()
        assert ledger(local) == [
            ("reserve", RESERVED),
            ("commit", PROVIDER_INPUT),
            ("reserve", RESERVED),
            ("release", RESERVED),
        ]
    assert len(provider.requests()) == 2


def test_missing_anthropic_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['anthropic'] = None\n"
        "try:\n"
        "    import cycles.integrations.anthropic\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "pip install 'cycles-sdk[anthropic]'" in out.stdout, out.stderr
