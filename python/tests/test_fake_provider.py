"""``cycles.testing.FakeProvider`` with the real ``openai`` and ``anthropic`` packages (the
versions python/scripts/test.sh pins) over real HTTP: Chat Completions whole and streamed
with ``include_usage``, Responses whole and streamed, Messages ``create`` and ``stream``,
500 and 429 surfaced as each library's error types, a cut stream seen as an error, the
recorder, reset, and unknown config keys refused by name."""

from __future__ import annotations

import re
import time
from typing import Any, cast

import anthropic
import openai
import pytest
from anthropic.types import MessageParam
from integration_support import oai
from openai.types.chat import ChatCompletionMessageParam

import cycles
from cycles.testing import FakeProvider

REPLY = "This is a deterministic reply from the fake provider."
REPLY_TOKENS = 9
CHAT: list[ChatCompletionMessageParam] = [{"role": "user", "content": "say hello to me"}]
MSGS: list[MessageParam] = [{"role": "user", "content": "say hello to me"}]


def ant(p: FakeProvider) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=p.base_url, api_key="sk-ant-fake", max_retries=0)


def test_chat_completions_whole_and_bounded(provider: FakeProvider) -> None:
    client = oai(provider)
    r = client.chat.completions.create(model="gpt-fake", messages=CHAT)
    assert r.choices[0].message.content == REPLY
    assert r.choices[0].finish_reason == "stop"
    assert r.usage is not None
    assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (4, REPLY_TOKENS)
    r = client.chat.completions.create(model="gpt-fake", messages=CHAT, max_tokens=3)
    assert (r.choices[0].message.content, r.choices[0].finish_reason) == ("This is a", "length")
    r = client.chat.completions.create(
        model="gpt-fake",
        messages=CHAT,
        max_completion_tokens=2,
    )
    assert r.usage is not None and r.usage.completion_tokens == 2
    seen = provider.requests()
    assert [q.output_bound for q in seen] == [None, 3, 2]
    assert seen[0].headers["authorization"] == "Bearer sk-fake"
    assert seen[0].path == "/v1/chat/completions" and seen[0].endpoint == "chat_completions"


def test_chat_completions_stream_with_and_without_usage(provider: FakeProvider) -> None:
    client = oai(provider)
    chunks = list(
        client.chat.completions.create(
            model="gpt-fake",
            messages=CHAT,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == REPLY
    assert all(c.usage is None for c in chunks[:-1])
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None
    assert (last.usage.prompt_tokens, last.usage.completion_tokens) == (4, REPLY_TOKENS)
    plain = list(client.chat.completions.create(model="gpt-fake", messages=CHAT, stream=True))
    assert all(c.usage is None for c in plain), "no usage chunk without include_usage"
    assert plain[-1].choices[0].finish_reason == "stop"


def test_responses_whole_and_streamed(provider: FakeProvider) -> None:
    client = oai(provider)
    r = client.responses.create(model="gpt-fake", instructions="Be terse.", input="say hello")
    assert (r.output_text, r.status) == (REPLY, "completed")
    assert r.usage is not None
    assert (r.usage.input_tokens, r.usage.output_tokens) == (4, REPLY_TOKENS)
    events = list(client.responses.create(model="gpt-fake", input="say hello", stream=True))
    assert events[0].type == "response.created"
    last = events[-1]
    assert last.type == "response.completed"
    assert last.response.usage is not None and last.response.usage.output_tokens == REPLY_TOKENS
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == REPLY
    with client.responses.stream(model="gpt-fake", input="say hello", max_output_tokens=16) as s:
        for _ in s:
            pass
        final = s.get_final_response()
    assert final.output_text == REPLY and final.usage is not None
    assert provider.requests()[-1].output_bound == 16


def test_anthropic_messages_create_and_stream(provider: FakeProvider) -> None:
    client = ant(provider)
    m = client.messages.create(model="claude-fake", max_tokens=100, messages=MSGS)
    assert m.content[0].type == "text" and m.content[0].text == REPLY
    assert m.stop_reason == "end_turn"
    assert (m.usage.input_tokens, m.usage.output_tokens) == (4, REPLY_TOKENS)
    m = client.messages.create(model="claude-fake", max_tokens=2, messages=MSGS)
    assert (m.stop_reason, m.usage.output_tokens) == ("max_tokens", 2)
    with client.messages.stream(model="claude-fake", max_tokens=100, messages=MSGS) as s:
        text = "".join(s.text_stream)
        final = s.get_final_message()
    assert text == REPLY
    assert (final.usage.input_tokens, final.usage.output_tokens) == (4, REPLY_TOKENS)
    seen = provider.requests()
    assert [q.output_bound for q in seen] == [100, 2, 100]
    # This version sends the key as a bearer token; older ones sent x-api-key.
    sent = seen[0].headers.get("x-api-key") or seen[0].headers.get("authorization")
    assert sent in ("sk-ant-fake", "Bearer sk-ant-fake")
    assert "anthropic-version" in seen[0].headers
    assert seen[2].stream


def test_reply_per_model_and_per_request() -> None:
    with FakeProvider(reply="plain words", replies={"special": "a special reply"}) as p:
        client = oai(p)
        r = client.chat.completions.create(model="x", messages=CHAT)
        assert r.choices[0].message.content == "plain words"
        r = client.chat.completions.create(model="special", messages=CHAT)
        assert r.choices[0].message.content == "a special reply"
        m = ant(p).messages.create(
            model="special",
            max_tokens=10,
            messages=MSGS,
            extra_headers={"x-fake-reply": "one two"},
        )
        assert m.content[0].type == "text" and m.content[0].text == "one two"


def test_server_error_and_rate_limit_are_the_librarys_errors(provider: FakeProvider) -> None:
    provider.add_fault({"endpoint": "chat_completions", "fault": {"kind": "server_error"}})
    with pytest.raises(openai.InternalServerError) as oe:
        oai(provider).chat.completions.create(model="gpt-fake", messages=CHAT)
    assert oe.value.status_code == 500
    provider.add_fault(
        {"endpoint": "responses", "fault": {"kind": "rate_limited", "retry_after": "7"}}
    )
    with pytest.raises(openai.RateLimitError) as re_:
        oai(provider).responses.create(model="gpt-fake", input="hi")
    assert re_.value.response.headers["retry-after"] == "7"
    provider.add_fault({"endpoint": "messages", "fault": {"kind": "server_error"}})
    with pytest.raises(anthropic.InternalServerError):
        ant(provider).messages.create(model="c", max_tokens=5, messages=MSGS)
    provider.add_fault({"model": "c", "fault": {"kind": "rate_limited", "retry_after": "2"}})
    with pytest.raises(anthropic.RateLimitError) as ae:
        ant(provider).messages.create(model="c", max_tokens=5, messages=MSGS)
    assert ae.value.response.headers["retry-after"] == "2"
    assert ae.value.body == {
        "type": "error",
        "error": {
            "type": "rate_limit_error",
            "message": "Rate limit reached (a scripted fault of the fake provider).",
        },
    }
    faults = [(q.status, q.fault) for q in provider.requests()]
    assert faults == [
        (500, "server_error"),
        (429, "rate_limited"),
        (500, "server_error"),
        (429, "rate_limited"),
    ]
    # Each rule fired once (times defaults to 1).
    m = ant(provider).messages.create(model="c", max_tokens=5, messages=MSGS)
    assert m.usage.output_tokens == 5


def _is_cut(e: BaseException) -> bool:
    # openai wraps the transport's error in APIConnectionError; anthropic's stream lets the
    # transport's RemoteProtocolError through.
    return isinstance(e, (openai.APIConnectionError, anthropic.APIConnectionError)) or (
        type(e).__name__ == "RemoteProtocolError"
    )


def test_a_cut_stream_is_an_error_after_the_first_chunks(provider: FakeProvider) -> None:
    provider.add_fault({"call": 0, "fault": {"kind": "cut_stream", "after_chunks": 3}})
    got: list[str] = []
    with pytest.raises(Exception) as e:
        for c in oai(provider).chat.completions.create(
            model="gpt-fake",
            messages=CHAT,
            stream=True,
            stream_options={"include_usage": True},
        ):
            assert c.usage is None
            got.append(c.choices[0].delta.content or "")
    assert _is_cut(e.value), repr(e.value)
    assert "".join(got) == "This is", "role chunk and two pieces, then the cut"
    provider.add_fault({"endpoint": "messages", "fault": {"kind": "cut_stream", "after_chunks": 5}})
    text: list[str] = []
    with pytest.raises(Exception) as e:
        with ant(provider).messages.stream(model="c", max_tokens=50, messages=MSGS) as s:
            for t in s.text_stream:
                text.append(t)
    assert _is_cut(e.value), repr(e.value)
    assert "".join(text) == "This is"
    assert [q.fault for q in provider.requests()] == ["cut_stream", "cut_stream"]


def test_slow_first_byte_and_slow_chunks(provider: FakeProvider) -> None:
    provider.add_fault({"fault": {"kind": "slow_first_byte", "ms": 300}})
    start = time.monotonic()
    m = ant(provider).messages.create(model="c", max_tokens=5, messages=MSGS)
    assert time.monotonic() - start >= 0.3
    assert m.usage.output_tokens == 5
    provider.add_fault({"fault": {"kind": "slow_chunks", "ms": 40}})
    start = time.monotonic()
    with ant(provider).messages.stream(model="c", max_tokens=2, messages=MSGS) as s:
        assert "".join(s.text_stream) == "This is"
    # Eight events (two deltas), 40 ms before each.
    assert time.monotonic() - start >= 8 * 0.04
    assert [q.fault for q in provider.requests()] == ["slow_first_byte", "slow_chunks"]


def test_reset_stop_and_config_errors() -> None:
    p = FakeProvider(faults=[{"call": 1, "fault": {"kind": "server_error", "status": 503}}])
    client = oai(p)
    client.chat.completions.create(model="m", messages=CHAT)
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(model="m", messages=CHAT)
    p.reset()
    assert p.requests() == []
    client.chat.completions.create(model="m", messages=CHAT)
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(model="m", messages=CHAT)
    p.clear_faults()
    client.chat.completions.create(model="m", messages=CHAT)
    assert [q.call for q in p.requests()] == [0, 1, 2]
    assert repr(p).startswith("FakeProvider(base_url='http://127.0.0.1:")
    p.stop()
    p.stop()
    assert not p.running
    with pytest.raises(cycles.InvalidArgumentError, match="the fake provider is stopped"):
        p.requests()

    with pytest.raises(cycles.InvalidArgumentError) as e:
        FakeProvider(cast(Any, {"replys": {}}))
    assert e.value.message.startswith(
        "invalid fake provider config: unknown field `replys`, expected one of"
    )
    assert not re.search(r"line \d+ column \d+", e.value.message)
    with pytest.raises(cycles.InvalidArgumentError, match="unknown field `after`"):
        FakeProvider(faults=[cast(Any, {"fault": {"kind": "cut_stream", "after": 1}})])
    with FakeProvider() as q:
        with pytest.raises(cycles.InvalidArgumentError, match="missing field `ms`"):
            q.add_fault(cast(Any, {"fault": {"kind": "slow_first_byte"}}))


async def test_the_async_clients_stream_with_usage(provider: FakeProvider) -> None:
    o = openai.AsyncOpenAI(base_url=provider.openai_base_url, api_key="k", max_retries=0)
    stream = await o.chat.completions.create(
        model="gpt-fake", messages=CHAT, stream=True, stream_options={"include_usage": True}
    )
    chunks = [c async for c in stream]
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == REPLY_TOKENS
    a = anthropic.AsyncAnthropic(base_url=provider.base_url, api_key="k", max_retries=0)
    async with a.messages.stream(model="c", max_tokens=4, messages=MSGS) as s:
        text = "".join([t async for t in s.text_stream])
        final = await s.get_final_message()
    assert (text, final.stop_reason, final.usage.output_tokens) == (
        "This is a deterministic",
        "max_tokens",
        4,
    )
    await o.close()
    await a.close()


def test_a_stream_error_event(provider: FakeProvider) -> None:
    provider.add_fault({"times": 0, "fault": {"kind": "stream_error", "after_chunks": 2}})
    with pytest.raises(openai.APIError, match="scripted error mid-stream"):
        list(oai(provider).chat.completions.create(model="m", messages=CHAT, stream=True))
    # The Responses stream yields the error as an event of its own.
    events = list(oai(provider).responses.create(model="m", input="x", stream=True))
    assert [e.type for e in events] == ["response.created", "response.in_progress", "error"]
    with pytest.raises(anthropic.APIStatusError, match="overloaded_error"):
        with ant(provider).messages.stream(model="c", max_tokens=9, messages=MSGS) as s:
            s.get_final_message()
    with pytest.raises(anthropic.InternalServerError):
        ant(provider).messages.create(model="c", max_tokens=9, messages=MSGS)
