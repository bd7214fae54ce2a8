"""``cycles.integrations.openai_agents`` with the real ``openai-agents`` (the version
python/scripts/test.sh pins) against the fake provider and the local Cycles server over real
HTTP: ``Runner.run`` and ``Runner.run_streamed`` of an agent whose model is the SDK's
``OpenAIResponsesModel`` or ``OpenAIChatCompletionsModel``, guarded as a ``Model`` or through
a ``ModelProvider``. Tracing is disabled in every run (it would export to api.openai.com).

The fake provider never calls tools (its README), so every run here is one model call: the
agent answers in its first turn. What a run of several turns adds is one more guarded
``get_response`` / ``stream_response`` per turn, the call tested here.

Charges, by hand: the agent's instructions "Be terse." are 4 + ceil(9 / 4) = 7 estimated
tokens, the input "say hello to me" 8 (integration_support), the bound 50: 65 reserved. The
provider counts words: 2 + 4 in, 9 out: 15 committed."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any

import openai
import pytest
from agents import (
    Agent,
    ModelSettings,
    OpenAIChatCompletionsModel,
    OpenAIProvider,
    OpenAIResponsesModel,
    RunConfig,
    Runner,
    TracingProcessor,
    add_trace_processor,
    function_tool,
)
from agents.tracing import Span, Trace
from integration_support import (
    ESTIMATED_PROMPT,
    PROMPT,
    PROVIDER_INPUT,
    REPLY_TOKENS,
    Events,
    aoai,
    ledger,
    reserve_bodies,
    server,
    settled_once,
)

import cycles
from cycles.integrations import CallNotSentError
from cycles.integrations.openai_agents import CyclesModel, CyclesModelProvider, guard
from cycles.models import Caps
from cycles.testing import FakeProvider, LocalServer

INSTRUCTIONS = "Be terse."
RESERVED = 7 + ESTIMATED_PROMPT + 50
COMMITTED = 2 + PROVIDER_INPUT + REPLY_TOKENS
#: Tracing off: the SDK's default exporter would post every run to api.openai.com.
NO_TRACING = RunConfig(tracing_disabled=True)


def responses_model(p: FakeProvider) -> OpenAIResponsesModel:
    return OpenAIResponsesModel(model="gpt-fake", openai_client=aoai(p))


def chat_model(p: FakeProvider) -> OpenAIChatCompletionsModel:
    return OpenAIChatCompletionsModel(model="gpt-fake", openai_client=aoai(p))


def agent(model: Any, max_tokens: int | None = 50, **kw: Any) -> Agent[None]:
    return Agent(
        name="greeter",
        instructions=INSTRUCTIONS,
        model=model,
        model_settings=ModelSettings(max_tokens=max_tokens),
        **kw,
    )


async def streamed(a: Agent[None], local: LocalServer | None = None) -> tuple[str, list[Any]]:
    """Runs ``a`` streamed; the ledger (when given) as it was at the first text delta."""
    result = Runner.run_streamed(a, PROMPT, run_config=NO_TRACING)
    at_first: list[Any] = []
    async for ev in result.stream_events():
        if ev.type == "raw_response_event" and ev.data.type == "response.output_text.delta":
            if local is not None and not at_first:
                at_first = ledger(local)
    return str(result.final_output), at_first


@pytest.mark.parametrize("kind", ["responses", "chat_completions"])
async def test_a_run_reserves_then_commits_the_usage(
    kind: str, provider: FakeProvider, local: LocalServer
) -> None:
    inner = responses_model(provider) if kind == "responses" else chat_model(provider)
    async with local.async_client() as c:
        model = guard(inner, cycles=c)
        assert isinstance(model, CyclesModel) and model.api == kind and model.name == "gpt-fake"
        result = await Runner.run(agent(model), PROMPT, run_config=NO_TRACING)
        assert str(result.final_output).startswith("This is")
        usage = result.context_wrapper.usage
        assert (usage.input_tokens, usage.output_tokens) == (2 + PROVIDER_INPUT, REPLY_TOKENS)
    assert ledger(local) == [("reserve", RESERVED), ("commit", COMMITTED)]
    (body,) = reserve_bodies(local)
    assert body["action"] == {"kind": "llm.completion", "name": "gpt-fake"}
    (q,) = provider.requests()
    assert q.endpoint == kind and q.output_bound == 50


@pytest.mark.parametrize("kind", ["responses", "chat_completions"])
async def test_a_streamed_run_holds_then_commits_the_usage(
    kind: str, provider: FakeProvider, local: LocalServer
) -> None:
    inner = responses_model(provider) if kind == "responses" else chat_model(provider)
    async with local.async_client() as c:
        text, at_first = await streamed(agent(guard(inner, cycles=c)), local)
    assert text.startswith("This is")
    assert at_first == [("reserve", RESERVED)], "held while the model streams"
    assert ledger(local) == [("reserve", RESERVED), ("commit", COMMITTED)]
    (q,) = provider.requests()
    assert q.body["stream"] is True
    if kind == "chat_completions":
        # The SDK asks for usage only from api.openai.com; the guard asks everywhere.
        assert q.body["stream_options"] == {"include_usage": True}


async def test_a_streamed_chat_run_without_usage_commits_the_estimate(
    provider: FakeProvider, local: LocalServer
) -> None:
    async with local.async_client() as c:
        model = guard(chat_model(provider), cycles=c)
        a = Agent(
            name="greeter",
            instructions=INSTRUCTIONS,
            model=model,
            model_settings=ModelSettings(max_tokens=50, include_usage=False),
        )
        await streamed(a)
    assert ledger(local) == [("reserve", RESERVED), ("commit", RESERVED)]
    assert provider.requests()[0].body["stream_options"] == {"include_usage": False}


async def test_a_guarded_provider_guards_every_named_model(
    provider: FakeProvider, local: LocalServer
) -> None:
    async with local.async_client() as c:
        for use_responses in (True, False):
            models = guard(
                OpenAIProvider(openai_client=aoai(provider), use_responses=use_responses),
                cycles=c,
                action_kind="llm.agent",
            )
            assert isinstance(models, CyclesModelProvider)
            config = RunConfig(model_provider=models, tracing_disabled=True)
            await Runner.run(agent("gpt-fake"), PROMPT, run_config=config)
            result = Runner.run_streamed(agent("gpt-fake"), PROMPT, run_config=config)
            async for _ in result.stream_events():
                pass
    assert ledger(local) == [("reserve", RESERVED), ("commit", COMMITTED)] * 4
    assert {b["action"]["kind"] for b in reserve_bodies(local)} == {"llm.agent"}
    assert [q.endpoint for q in provider.requests()] == ["responses"] * 2 + ["chat_completions"] * 2


async def test_a_denial_raises_and_the_provider_sees_nothing(provider: FakeProvider) -> None:
    with server(allocated=RESERVED - 1) as local:
        async with local.async_client() as c:
            for inner in (responses_model(provider), chat_model(provider)):
                model = guard(inner, cycles=c)
                with pytest.raises(cycles.BudgetExceededError):
                    await Runner.run(agent(model), PROMPT, run_config=NO_TRACING)
                with pytest.raises(cycles.BudgetExceededError):
                    await streamed(agent(model))
        assert ledger(local) == []
    assert provider.requests() == []


async def test_a_provider_error_releases(provider: FakeProvider, local: LocalServer) -> None:
    provider.add_fault({"times": 4, "fault": {"kind": "server_error"}})
    async with local.async_client() as c:
        for inner in (responses_model(provider), chat_model(provider)):
            model = guard(inner, cycles=c)
            with pytest.raises(openai.InternalServerError):
                await Runner.run(agent(model), PROMPT, run_config=NO_TRACING)
            with pytest.raises(openai.InternalServerError):
                await streamed(agent(model))
    assert ledger(local) == [("reserve", RESERVED), ("release", RESERVED)] * 4
    assert len(provider.requests()) == 4


async def test_a_cut_stream_is_released(provider: FakeProvider, local: LocalServer) -> None:
    # Both APIs report a stream's usage only at its end: nothing to commit.
    provider.add_fault({"times": 2, "fault": {"kind": "cut_stream", "after_chunks": 3}})
    async with local.async_client() as c:
        for inner in (responses_model(provider), chat_model(provider)):
            with pytest.raises(openai.APIConnectionError):
                await streamed(agent(guard(inner, cycles=c)))
    assert ledger(local) == [("reserve", RESERVED), ("release", RESERVED)] * 2


async def test_caps_lower_max_tokens(provider: FakeProvider) -> None:
    events = Events()
    # Responses refuses max_output_tokens below 16 (as OpenAI does); the reply is 9 words, so
    # the capped response still completes (the SDK raises on an incomplete one).
    with server(caps=Caps(max_tokens=16)) as local:
        async with local.async_client(on_event=events) as c:
            await Runner.run(
                agent(guard(responses_model(provider), cycles=c)), PROMPT, run_config=NO_TRACING
            )
            await streamed(agent(guard(responses_model(provider), cycles=c)))
        assert ledger(local) == [("reserve", RESERVED), ("commit", COMMITTED)] * 2
    with server(caps=Caps(max_tokens=3)) as local:
        async with local.async_client(on_event=events) as c:
            model = guard(chat_model(provider), cycles=c, default_output_bound=40)
            await Runner.run(agent(model), PROMPT, run_config=NO_TRACING)
            # No max_tokens on the agent: the default is reserved, the cap is sent.
            await streamed(agent(model, max_tokens=None))
        assert ledger(local) == [
            ("reserve", RESERVED),
            ("commit", 2 + PROVIDER_INPUT + 3),
            ("reserve", RESERVED - 50 + 40),
            ("commit", 2 + PROVIDER_INPUT + 3),
        ]
    applied = events.wait("caps_applied", 4)
    seen = provider.requests()
    assert [q.output_bound for q in seen] == [16, 16, 3, 3]
    assert [q.body.get("max_output_tokens") for q in seen[:2]] == [16, 16]
    assert [q.body.get("max_tokens") for q in seen[2:]] == [3, 3]
    assert [(e.fields["api"], e.fields["bound_from"], e.fields["bound_to"]) for e in applied] == [
        ("responses", 50, 16),
        ("responses", 50, 16),
        ("chat_completions", 50, 3),
        ("chat_completions", None, 3),
    ]


@function_tool
def shell(command: str) -> str:
    """Runs a shell command."""
    return command


@function_tool
def calc(expression: str) -> str:
    """Evaluates an arithmetic expression."""
    return expression


async def test_caps_remove_the_denied_tools_and_handoffs(provider: FakeProvider) -> None:
    helper = Agent(name="helper", instructions="Help.")
    with server(caps=Caps(tool_denylist=["shell", "transfer_to_helper"])) as local:
        async with local.async_client() as c:
            for inner in (responses_model(provider), chat_model(provider)):
                a = agent(guard(inner, cycles=c), tools=[shell, calc], handoffs=[helper])
                await Runner.run(a, PROMPT, run_config=NO_TRACING)
        settled_once(local)
    responses, chat = (q.body for q in provider.requests())
    assert [t["name"] for t in responses["tools"]] == ["calc"]
    assert [t["function"]["name"] for t in chat["tools"]] == ["calc"]


async def test_a_cap_of_zero_sends_nothing(provider: FakeProvider) -> None:
    with server(caps=Caps(max_tokens=0)) as local:
        async with local.async_client() as c:
            model = guard(responses_model(provider), cycles=c)
            with pytest.raises(CallNotSentError) as e:
                await Runner.run(agent(model), PROMPT, run_config=NO_TRACING)
            assert e.value.released
        assert ledger(local) == [("reserve", RESERVED), ("release", RESERVED)]
    assert provider.requests() == []


async def test_fifty_concurrent_runs_each_settle_once(provider: FakeProvider) -> None:
    with server() as local:
        async with local.async_client() as c:
            model = guard(responses_model(provider), cycles=c)

            async def one(i: int) -> str:
                if i % 2:
                    return (await streamed(agent(model)))[0]
                return str(
                    (await Runner.run(agent(model), PROMPT, run_config=NO_TRACING)).final_output
                )

            got = await asyncio.gather(*(one(i) for i in range(50)))
        assert all(t.startswith("This is") for t in got)
        outcomes = settled_once(local)
        assert len(outcomes) == 50 and set(outcomes.values()) == {"commit"}
        assert [a for k, a in ledger(local) if k == "commit"] == [COMMITTED] * 50
    assert len(provider.requests()) == 50


class _Recorder(TracingProcessor):
    """Every trace and span the SDK would export."""

    def __init__(self) -> None:
        self.seen: list[object] = []

    def on_trace_start(self, trace: Trace) -> None:
        self.seen.append(trace)

    def on_trace_end(self, trace: Trace) -> None:
        self.seen.append(trace)

    def on_span_start(self, span: Span[Any]) -> None:
        self.seen.append(span)

    def on_span_end(self, span: Span[Any]) -> None:
        self.seen.append(span)

    def shutdown(self) -> None:
        pass

    def force_flush(self) -> None:
        pass


async def test_tracing_disabled_records_nothing_to_export(
    provider: FakeProvider, local: LocalServer
) -> None:
    recorder = _Recorder()
    add_trace_processor(recorder)  # beside the default exporter: what it would have been sent
    async with local.async_client() as c:
        model = guard(responses_model(provider), cycles=c)
        await Runner.run(agent(model), PROMPT, run_config=NO_TRACING)
        await streamed(agent(model))
    assert recorder.seen == []


async def test_guard_refuses_what_it_cannot_guard(provider: FakeProvider) -> None:
    with server() as local:
        async with local.async_client() as c:
            bad: Any = "gpt-fake"
            with pytest.raises(cycles.InvalidArgumentError, match="Model or ModelProvider"):
                guard(bad, cycles=c)
            with pytest.raises(cycles.InvalidArgumentError, match="name="):
                guard(OpenAIProvider(openai_client=aoai(provider)), cycles=c, name="x")
            model = guard(responses_model(provider), cycles=c, name="summary")
            assert model.name == "summary"
            # Without an output bound core cannot reserve: refused before anything is sent.
            with pytest.raises(cycles.InvalidArgumentError, match="output bound"):
                await Runner.run(agent(model, max_tokens=None), PROMPT, run_config=NO_TRACING)
        assert ledger(local) == []
    assert provider.requests() == []


def test_missing_openai_agents_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['agents'] = None\n"
        "try:\n"
        "    import cycles.integrations.openai_agents\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "pip install 'cycles-sdk[agents]'" in out.stdout, out.stderr


async def test_a_guarded_client_would_charge_a_streamed_turn_its_estimate(
    provider: FakeProvider, local: LocalServer
) -> None:
    # Why the guard wraps the SDK's Model, not its client (docs/integrations.md): the SDK
    # streams a Responses turn through with_streaming_response, a raw response with no usage
    # the client's guard can read, so the streamed turn commits its whole estimate.
    from cycles.integrations.openai import guard as guard_client

    async with local.async_client() as c:
        client = guard_client(aoai(provider), cycles=c)
        a = agent(OpenAIResponsesModel(model="gpt-fake", openai_client=client))
        await Runner.run(a, PROMPT, run_config=NO_TRACING)
        await streamed(a)
    assert ledger(local) == [
        ("reserve", RESERVED),
        ("commit", COMMITTED),
        ("reserve", RESERVED),
        ("commit", RESERVED),
    ]
