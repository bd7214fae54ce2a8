"""Guard any LangChain chat model: ``guard(ChatOpenAI(...), cycles=client)`` is a chat model
(a ``BaseChatModel``, so a Runnable: ``invoke``, ``ainvoke``, ``stream``, ``astream``,
``batch``, chains and graphs) whose every model call reserves first, is capped under
``ALLOW_WITH_CAPS`` and commits the usage the model reports::

    from langchain_openai import ChatOpenAI
    from cycles.integrations.langchain import guard

    llm = guard(ChatOpenAI(model="gpt-4o-mini", max_tokens=256, stream_usage=True), cycles=client)
    llm.invoke("Say hello.")

Why a chat-model wrapper and not callbacks: a callback with ``raise_error`` can refuse a call
in ``on_chat_model_start`` and see the usage in ``on_llm_end``, but it cannot change the
request, so it could not lower the output bound or remove tools under caps; it also has no
place to hold a reservation across a stream that the caller abandons. The wrapper sees the
call before (estimate, reserve, caps as call keywords) and after (usage, settle), for every
entry point, because LangChain routes them all through ``_generate`` / ``_stream``.

The request core estimates is the messages' texts (``{"messages": [{"role", "content"}]}``,
LangChain's content blocks have the same ``text`` parts) and the output bound: the call's
``max_tokens``, else the model's ``max_tokens`` attribute, else ``default_output_bound``.
Caps are applied as the call keywords ``max_tokens`` (lowered) and ``tools`` (filtered by
core's ``plan_caps`` on that request; ``tool_choice`` naming a removed tool is dropped). The
usage is LangChain's ``usage_metadata`` (``input_tokens`` / ``output_tokens``; a stream's
chunks summed with LangChain's ``add_usage``), priced by core's ``actual``; the settlement is
core's. A stream needs the model to report usage (``ChatOpenAI(stream_usage=True)``),
otherwise it commits its estimate. Extra: ``cycles-sdk[langchain]``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any, Callable, Mapping

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForLLMRun,
        CallbackManagerForLLMRun,
    )
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage
    from langchain_core.messages.ai import UsageMetadata, add_usage
    from langchain_core.outputs import ChatGenerationChunk, ChatResult
    from pydantic import ConfigDict
except ImportError as e:  # pragma: no cover - exercised by a subprocess test
    raise ImportError(
        "cycles.integrations.langchain needs langchain-core: pip install 'cycles-sdk[langchain]'"
    ) from e

from ..models import SubjectLike
from ..pricing import TOKENS, Pricing, Usage
from ._guard import Call, CyclesClient, Settings
from .tokenizer import Tokenizer

__all__ = ["guard", "CyclesChatModel"]


def _model_name(model: BaseChatModel) -> str:
    for attr in ("model_name", "model"):
        v = getattr(model, attr, None)
        if isinstance(v, str) and v:
            return v
    return model._llm_type


def _usage(u: UsageMetadata | None) -> Usage:
    if not u:
        return Usage()
    return Usage(u.get("input_tokens"), u.get("output_tokens"))


def _result_usage(result: ChatResult) -> Usage:
    for g in result.generations:
        if isinstance(g.message, AIMessage):
            return _usage(g.message.usage_metadata)
    return Usage()


class CyclesChatModel(BaseChatModel):
    """A chat model guarded by Cycles (see the module). Build it with :func:`guard`."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    inner: BaseChatModel
    settings: Any
    model_label: str | None = None

    @property
    def _llm_type(self) -> str:
        return f"cycles-guarded-{self.inner._llm_type}"

    # --- one call ---

    def _begin(self, messages: list[BaseMessage], kwargs: dict[str, Any]) -> Call:
        s: Settings = self.settings
        request: dict[str, Any] = {
            "model": self.model_label or _model_name(self.inner),
            "messages": [{"role": m.type, "content": m.content} for m in messages],
        }
        bound = kwargs.get("max_tokens")
        if bound is None:
            bound = getattr(self.inner, "max_tokens", None)
        if isinstance(bound, int) and not isinstance(bound, bool):
            request["max_tokens"] = bound
        for k in ("tools", "tool_choice", "parallel_tool_calls"):
            if kwargs.get(k) is not None:
                request[k] = kwargs[k]
        return s.call("chat_completions", request)

    @staticmethod
    def _applied(call: Call, kwargs: dict[str, Any], planned: dict[str, Any]) -> dict[str, Any]:
        """The call keywords after core's caps plan (``planned`` is the planned request)."""
        if planned is call.request:
            return kwargs  # nothing to rewrite
        out = dict(kwargs)
        # A request without a bound gets the API's first field: a keyword max_tokens here.
        lowered = planned.get("max_tokens", planned.get("max_completion_tokens"))
        if lowered is not None and lowered != call.request.get("max_tokens"):
            out["max_tokens"] = lowered
        for k in ("tools", "tool_choice", "parallel_tool_calls"):
            if k in planned:
                if k in call.request:
                    out[k] = planned[k]
            else:
                out.pop(k, None)
        return out

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        """The inner model's tool binding (its own tool format), bound to this guard."""
        bound = self.inner.bind_tools(tools, **kwargs)
        return self.bind(**getattr(bound, "kwargs", {}))

    @staticmethod
    def _observe(call: Call, u: Usage) -> None:
        if u.reported:
            call.observe_usage(u)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        call = self._begin(messages, kwargs)
        call.enter()
        try:
            kwargs = self._applied(call, kwargs, call.caps(call.request))
            result = self.inner._generate(messages, stop=stop, run_manager=run_manager, **kwargs)
            self._observe(call, _result_usage(result))
        except BaseException as e:
            call.end(e)
            raise
        call.end(None)
        return result

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        call = self._begin(messages, kwargs)
        await call.aenter()
        try:
            kwargs = self._applied(call, kwargs, await call.acaps(call.request))
            result = await self.inner._agenerate(
                messages, stop=stop, run_manager=run_manager, **kwargs
            )
            self._observe(call, _result_usage(result))
        except BaseException as e:
            await call.aend(e)
            raise
        await call.aend(None)
        return result

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        call = self._begin(messages, kwargs)
        call.enter()
        total: UsageMetadata | None = None
        try:
            kwargs = self._applied(call, kwargs, call.caps(call.request))
            for chunk in self.inner._stream(messages, stop=stop, run_manager=run_manager, **kwargs):
                u = getattr(chunk.message, "usage_metadata", None)
                if u:
                    total = add_usage(total, u)
                    self._observe(call, _usage(total))
                yield chunk
        except GeneratorExit:
            call.end(None)  # left early: as a stream closed before its end
            raise
        except BaseException as e:
            call.end(e)
            raise
        call.end(None)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        call = self._begin(messages, kwargs)
        await call.aenter()
        total: UsageMetadata | None = None
        try:
            kwargs = self._applied(call, kwargs, await call.acaps(call.request))
            async for chunk in self.inner._astream(
                messages, stop=stop, run_manager=run_manager, **kwargs
            ):
                u = getattr(chunk.message, "usage_metadata", None)
                if u:
                    total = add_usage(total, u)
                    self._observe(call, _usage(total))
                yield chunk
        except GeneratorExit:
            await call.aend(None)
            raise
        except BaseException as e:
            await call.aend(e)
            raise
        await call.aend(None)


def guard(
    model: BaseChatModel,
    *,
    cycles: CyclesClient,
    pricing: Pricing = TOKENS,
    subject: SubjectLike | None = None,
    action_kind: str = "llm.completion",
    default_output_bound: int | None = None,
    prompt_tokens: Callable[[Mapping[str, Any]], int] | None = None,
    tokenizer: Tokenizer = "auto",
    name: str | None = None,
) -> CyclesChatModel:
    """``model`` guarded by ``cycles``: a chat model of its own (the arguments are
    :func:`cycles.integrations.openai.guard`'s; ``name`` is the model name the action and the
    price table use, default the model's ``model_name`` / ``model``)."""
    s = Settings(
        cycles=cycles,
        pricing=pricing,
        subject=subject,
        action_kind=action_kind,
        default_output_bound=default_output_bound,
        prompt_tokens=prompt_tokens,
        tokenizer=tokenizer,
        omitted=(),
    )
    return CyclesChatModel(inner=model, settings=s, model_label=name)
