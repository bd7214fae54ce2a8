"""``cycles.integrations.langchain`` with the real ``langchain-core`` and ``langchain-openai``
(the versions python/scripts/test.sh pins): a guarded ``ChatOpenAI`` against the fake
provider and the local Cycles server, through ``invoke``, ``ainvoke``, ``stream`` and
``astream``. The same charges as the OpenAI integration's (integration_support): the prompt
"say hello to me" as one message reserves 8 + 50 and commits 4 + 9."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any

import pytest

if sys.version_info < (3, 11):  # said in the run's summary, never silent
    pytest.skip(
        "langchain-core 1.8 needs CPython >= 3.11 (python/scripts/test.sh installs it there)",
        allow_module_level=True,
    )

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
from langchain_core.messages import AnyMessage, HumanMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, MessagesState, StateGraph

import cycles
from cycles.integrations import CallNotSentError
from cycles.integrations.langchain import CyclesChatModel, guard
from cycles.models import Caps
from cycles.testing import FakeProvider, LocalServer

RESERVED = ESTIMATED_PROMPT + 50
COMMITTED = PROVIDER_INPUT + REPLY_TOKENS


def chat(p: FakeProvider, **kw: Any) -> ChatOpenAI:
    # By the names users write (ChatOpenAI's fields declare other aliases, which its
    # validators translate; a typed call would have to spell those).
    params: dict[str, Any] = {
        "model": "gpt-fake",
        "base_url": p.openai_base_url,
        "api_key": "sk-fake",
        "max_retries": 0,
        "max_tokens": 50,
        "stream_usage": True,
        **kw,
    }
    return ChatOpenAI(**params)


def test_invoke_and_stream(provider: FakeProvider, local: LocalServer) -> None:
    with local.client() as c:
        llm = guard(chat(provider), cycles=c)
        assert isinstance(llm, CyclesChatModel)
        reply = llm.invoke(PROMPT)
        assert reply.usage_metadata is not None
        assert reply.usage_metadata["output_tokens"] == REPLY_TOKENS
        chunks = list(llm.stream(PROMPT))
        assert "".join(str(c.content) for c in chunks).startswith("This is")
        assert ledger(local) == [("reserve", RESERVED), ("commit", COMMITTED)] * 2
    assert reserve_bodies(local)[0]["action"] == {"kind": "llm.completion", "name": "gpt-fake"}
    assert [q.output_bound for q in provider.requests()] == [50, 50]


def test_ainvoke_astream_and_concurrency(provider: FakeProvider) -> None:
    async def main(local: LocalServer) -> None:
        c = local.async_client()
        llm = guard(chat(provider), cycles=c)

        async def one(i: int) -> None:
            if i % 2:
                await llm.ainvoke(PROMPT)
            else:
                async for _ in llm.astream(PROMPT):
                    pass

        await asyncio.gather(*(one(i) for i in range(20)))
        await c.aclose()

    with server() as local:
        asyncio.run(main(local))
        assert set(settled_once(local).values()) == {"commit"}
        assert [a for k, a in ledger(local) if k == "commit"] == [COMMITTED] * 20


def test_provider_error_releases_and_denial_sends_nothing(provider: FakeProvider) -> None:
    provider.add_fault({"fault": {"kind": "server_error"}})
    with server() as local, local.client() as c:
        llm = guard(chat(provider), cycles=c)
        with pytest.raises(Exception, match="500"):
            llm.invoke(PROMPT)
        assert ledger(local) == [("reserve", RESERVED), ("release", RESERVED)]
    provider.reset()
    with server(allocated=RESERVED - 1) as local, local.client() as c:
        llm = guard(chat(provider), cycles=c)
        with pytest.raises(cycles.BudgetExceededError):
            llm.invoke(PROMPT)
        with pytest.raises(cycles.BudgetExceededError):
            list(llm.stream(PROMPT))
        assert ledger(local) == []
    assert provider.requests() == []


@tool
def shell(command: str) -> str:
    """Runs a shell command."""
    return command


@tool
def calc(expression: str) -> str:
    """Evaluates an expression."""
    return expression


def test_caps_lower_max_tokens_and_filter_bound_tools(provider: FakeProvider) -> None:
    events = Events()
    with server(caps=Caps(max_tokens=3, tool_denylist=["shell"])) as local:
        with local.client(on_event=events) as c:
            llm = guard(chat(provider), cycles=c)
            reply = llm.bind_tools([shell, calc]).invoke(PROMPT)
            assert reply.response_metadata.get("finish_reason") == "length"
            list(llm.stream(PROMPT))
            applied = events.wait("caps_applied", 2)
            assert ledger(local) == [("reserve", RESERVED), ("commit", PROVIDER_INPUT + 3)] * 2
    first, second = provider.requests()
    assert [q.output_bound for q in (first, second)] == [3, 3]
    assert [t["function"]["name"] for t in first.body["tools"]] == ["calc"]
    assert applied[0].fields["removed_tools"] == ["shell"]
    with server(caps=Caps(max_tokens=0)) as local, local.client() as c:
        with pytest.raises(CallNotSentError):
            guard(chat(provider), cycles=c).invoke(PROMPT)
        assert ledger(local) == [("reserve", RESERVED), ("release", RESERVED)]
    assert len(provider.requests()) == 2


def test_inside_a_langgraph_graph(provider: FakeProvider, local: LocalServer) -> None:
    with local.client() as c:
        llm = guard(chat(provider), cycles=c)

        def call_model(state: MessagesState) -> dict[str, list[AnyMessage]]:
            return {"messages": [llm.invoke(state["messages"])]}

        graph = StateGraph(MessagesState)
        graph.add_node("model", call_model)
        graph.add_edge(START, "model")
        graph.add_edge("model", END)
        app = graph.compile()
        out = app.invoke({"messages": [HumanMessage(PROMPT)]})
        assert str(out["messages"][-1].content).startswith("This is")
        streamed = list(app.stream({"messages": [HumanMessage(PROMPT)]}, stream_mode="messages"))
        assert streamed, "the graph streamed the model's messages"
        assert ledger(local) == [("reserve", RESERVED), ("commit", COMMITTED)] * 2


def test_missing_langchain_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['langchain_core'] = None\n"
        "try:\n"
        "    import cycles.integrations.langchain\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "pip install 'cycles-sdk[langchain]'" in out.stdout, out.stderr
