"""Guard the OpenAI Agents SDK (``openai-agents``): every model call of a run reserves first,
is capped under ``ALLOW_WITH_CAPS`` and commits the usage the model reports::

    from agents import Agent, RunConfig, Runner
    from cycles.integrations.openai_agents import guard

    # Every agent of the run whose model is a name (the default): through the provider.
    config = RunConfig(model_provider=guard(MultiProvider(), cycles=client))
    # Or one model object.
    agent = Agent(name="a", model=guard(OpenAIResponsesModel("gpt-4o-mini", AsyncOpenAI()), ...))

Why the SDK's ``Model`` interface and not a guarded ``AsyncOpenAI`` client
(``set_default_openai_client``): the SDK's Responses model streams through
``client.responses.with_streaming_response.create``, whose result carries no parsed usage, so a
guarded client could only commit the estimate of every streamed turn; its websocket transport
and non-OpenAI models (LiteLLM, any custom ``Model``) bypass the client altogether. Every turn
of a run, streamed or not, whatever the model, is one ``Model.get_response`` or
``Model.stream_response`` call: the wrapper sees the request before (estimate, reserve, caps
as ``ModelSettings``) and the usage after. ``RunHooks.on_llm_start`` could refuse a call but
cannot change it (no caps), and holds nothing across a stream.

The request core estimates is the SDK's own (Responses format): ``instructions`` (the
agent's), ``input`` (the turn's items) and the output bound ``ModelSettings.max_tokens``, else
``default_output_bound``. Under caps, ``max_tokens`` is lowered and the tools and handoffs
outside the caps are removed (core's ``plan_caps`` with the wire API of the model: Chat
Completions for ``OpenAIChatCompletionsModel``, Responses otherwise). The usage is the
``ModelResponse.usage`` of a call, or a stream's ``response.completed`` event, priced and
settled by core. Extra: ``cycles-sdk[agents]``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any, Callable, Mapping, overload

try:
    from agents.agent_output import AgentOutputSchemaBase
    from agents.handoffs import Handoff
    from agents.items import ModelResponse, TResponseInputItem, TResponseStreamEvent
    from agents.model_settings import ModelSettings
    from agents.models.interface import Model, ModelProvider, ModelTracing
    from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel
    from agents.retry import ModelRetryAdvice, ModelRetryAdviceRequest
    from agents.tool import Tool
    from openai.types.responses.response_prompt_param import ResponsePromptParam
except ImportError as e:  # pragma: no cover - exercised by a subprocess test
    raise ImportError(
        "cycles.integrations.openai_agents needs openai-agents: pip install 'cycles-sdk[agents]'"
    ) from e

from ..errors import InvalidArgumentError
from ..models import SubjectLike
from ..pricing import TOKENS, Api, Pricing, Usage, output_bound
from ._guard import Call, CyclesClient, Settings
from .tokenizer import Tokenizer

__all__ = ["CyclesModel", "CyclesModelProvider", "guard"]

# tool_choice values that name no tool.
_CHOICE_KEYWORDS = ("auto", "required", "none")


def _model_name(model: Model, name: str | None) -> str:
    if name is not None:
        return name
    v = getattr(model, "model", None)  # OpenAIResponsesModel, OpenAIChatCompletionsModel, ...
    if isinstance(v, str) and v:
        return v
    raise InvalidArgumentError(
        f"cannot tell the model name of {type(model).__name__}: pass name= to guard()"
    )


def _tool_name(t: Any) -> str | None:
    n = getattr(t, "name", None)
    return n if isinstance(n, str) else None


class _Turn:
    """One model call: the request core sees, and how a caps rewrite maps back onto the SDK's
    arguments (``ModelSettings``, tools, handoffs)."""

    def __init__(
        self,
        model: CyclesModel,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        handoffs: list[Handoff],
    ) -> None:
        self.settings = model_settings
        self.tools = tools
        self.handoffs = handoffs
        kw: dict[str, Any] = {"model": model.name, "input": input}
        if system_instructions is not None:
            kw["instructions"] = system_instructions
        if model_settings.max_tokens is not None:
            kw["max_output_tokens"] = model_settings.max_tokens
        names = [n for n in map(_tool_name, tools) if n is not None]
        names += [h.tool_name for h in handoffs]
        if names:
            kw["tools"] = [{"type": "function", "name": n} for n in names]
        choice = model_settings.tool_choice
        if isinstance(choice, str) and choice not in _CHOICE_KEYWORDS:
            kw["tool_choice"] = {"type": "function", "name": choice}
        if model_settings.parallel_tool_calls is not None:
            kw["parallel_tool_calls"] = model_settings.parallel_tool_calls
        self.kw = kw
        self.call: Call = model.settings.call(model.api, kw)

    def apply(self, capped: Mapping[str, Any]) -> None:
        """Maps the request rewritten under caps back onto the SDK's arguments."""
        if capped is self.kw:
            return  # no caps, or nothing to change
        changes: dict[str, Any] = {"max_tokens": output_bound(capped)}
        kept = {t.get("name") for t in capped.get("tools", ())}
        self.tools = [t for t in self.tools if _tool_name(t) in kept or _tool_name(t) is None]
        self.handoffs = [h for h in self.handoffs if h.tool_name in kept]
        if "tool_choice" in self.kw and "tool_choice" not in capped:
            changes["tool_choice"] = None
        if "parallel_tool_calls" in self.kw and "parallel_tool_calls" not in capped:
            changes["parallel_tool_calls"] = None
        self.settings = dataclasses.replace(self.settings, **changes)

    def observe(self, response: ModelResponse) -> None:
        u = response.usage
        # The SDK reports Usage(requests=1) with no tokens when the provider sent no usage.
        if u.input_tokens or u.output_tokens:
            self.call.observe_usage(Usage(u.input_tokens, u.output_tokens))


class CyclesModel(Model):
    """An Agents SDK ``Model`` whose every ``get_response`` and ``stream_response`` is a
    guarded call of the model it wraps (:func:`guard`)."""

    def __init__(self, model: Model, settings: Settings, name: str | None = None) -> None:
        #: The wrapped model.
        self.inner = model
        #: The model's name: the action's name and the price table's key.
        self.name = _model_name(model, name)
        self.settings = settings
        # The wire API whose caps rules apply: the SDK's other models speak Responses.
        self.api: Api = (
            "chat_completions" if isinstance(model, OpenAIChatCompletionsModel) else "responses"
        )

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
        **later: Any,
    ) -> ModelResponse:
        turn = _Turn(self, system_instructions, input, model_settings, tools, handoffs)
        call = turn.call
        await call.aenter()
        try:
            turn.apply(await call.acaps(turn.kw))
            response = await self.inner.get_response(
                system_instructions,
                input,
                turn.settings,
                turn.tools,
                output_schema,
                turn.handoffs,
                tracing,
                previous_response_id=previous_response_id,
                conversation_id=conversation_id,
                prompt=prompt,
                **later,  # keywords a later SDK adds reach the model unchanged
            )
            turn.observe(response)
        except BaseException as e:
            await call.aend(e)
            raise
        await call.aend(None)
        return response

    async def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
        **later: Any,
    ) -> AsyncIterator[TResponseStreamEvent]:
        if model_settings.include_usage is None:
            # Ask for the stream's usage (a Chat Completions model off api.openai.com does not
            # by default), as the openai integration does; the caller's choice stands.
            model_settings = dataclasses.replace(model_settings, include_usage=True)
        turn = _Turn(self, system_instructions, input, model_settings, tools, handoffs)
        call = turn.call
        await call.aenter()
        try:
            turn.apply(await call.acaps(turn.kw))
            # Every model's stream is of Responses events (the SDK converts Chat Completions').
            call.read_as("responses")
            events = self.inner.stream_response(
                system_instructions,
                input,
                turn.settings,
                turn.tools,
                output_schema,
                turn.handoffs,
                tracing,
                previous_response_id=previous_response_id,
                conversation_id=conversation_id,
                prompt=prompt,
                **later,  # keywords a later SDK adds reach the model unchanged
            )
            async for event in events:
                call.observe(event)
                yield event
        except GeneratorExit:
            await call.aend(None)  # closed early (the run was cancelled): as the openai guard
            raise
        except BaseException as e:
            await call.aend(e)
            raise
        await call.aend(None)

    def get_retry_advice(self, request: ModelRetryAdviceRequest) -> ModelRetryAdvice | None:
        return self.inner.get_retry_advice(request)

    async def _cleanup_on_run_end(self, owner: object) -> None:
        await self.inner._cleanup_on_run_end(owner)

    async def close(self) -> None:
        await self.inner.close()


class CyclesModelProvider(ModelProvider):
    """An Agents SDK ``ModelProvider`` whose models are the wrapped provider's, guarded: pass
    it as ``RunConfig(model_provider=...)`` and every agent of the run whose ``model`` is a
    name (or unset) is guarded (:func:`guard`)."""

    def __init__(self, provider: ModelProvider, settings: Settings) -> None:
        #: The wrapped provider.
        self.inner = provider
        self.settings = settings

    def get_model(self, model_name: str | None) -> Model:
        model = self.inner.get_model(model_name)
        # The model's own name (without MultiProvider's "openai/" prefix), else the one asked for.
        own = getattr(model, "model", None)
        return CyclesModel(
            model, self.settings, None if isinstance(own, str) and own else model_name
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


@overload
def guard(
    target: ModelProvider,
    *,
    cycles: CyclesClient,
    pricing: Pricing = ...,
    subject: SubjectLike | None = ...,
    action_kind: str = ...,
    default_output_bound: int | None = ...,
    prompt_tokens: Callable[[Mapping[str, Any]], int] | None = ...,
    tokenizer: Tokenizer = ...,
    name: str | None = ...,
) -> CyclesModelProvider: ...


@overload
def guard(
    target: Model,
    *,
    cycles: CyclesClient,
    pricing: Pricing = ...,
    subject: SubjectLike | None = ...,
    action_kind: str = ...,
    default_output_bound: int | None = ...,
    prompt_tokens: Callable[[Mapping[str, Any]], int] | None = ...,
    tokenizer: Tokenizer = ...,
    name: str | None = ...,
) -> CyclesModel: ...


def guard(
    target: Model | ModelProvider,
    *,
    cycles: CyclesClient,
    pricing: Pricing = TOKENS,
    subject: SubjectLike | None = None,
    action_kind: str = "llm.completion",
    default_output_bound: int | None = None,
    prompt_tokens: Callable[[Mapping[str, Any]], int] | None = None,
    tokenizer: Tokenizer = "auto",
    name: str | None = None,
) -> CyclesModel | CyclesModelProvider:
    """``target`` guarded by ``cycles`` (a :class:`cycles.Client` or
    :class:`cycles.AsyncClient`): a ``Model`` (e.g. ``OpenAIResponsesModel``,
    ``OpenAIChatCompletionsModel``) gives a :class:`CyclesModel`, a ``ModelProvider`` (e.g.
    ``MultiProvider()``, for ``RunConfig(model_provider=...)``) a
    :class:`CyclesModelProvider` whose every model is guarded.

    Each model call reserves core's estimate (instructions and input, plus
    ``ModelSettings.max_tokens``, else ``default_output_bound``; neither raises
    :class:`~cycles.InvalidArgumentError` before anything is sent) priced by ``pricing``, as
    the action ``(action_kind, model name)`` for ``subject``; ``name`` overrides the model's
    name (a ``Model``). A denial raises :class:`~cycles.BudgetExceededError` out of
    ``Runner.run`` and the provider sees no request; ``caps.max_tokens`` 0 raises
    :class:`~cycles.integrations.CallNotSentError`. ``prompt_tokens`` and ``tokenizer``
    (:mod:`cycles.integrations.tokenizer`): as in :func:`cycles.integrations.openai.guard`."""
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
    if isinstance(target, Model):
        return CyclesModel(target, s, name)
    if isinstance(target, ModelProvider):
        if name is not None:
            raise InvalidArgumentError("name= applies to a Model, not a ModelProvider")
        return CyclesModelProvider(target, s)
    raise InvalidArgumentError(
        f"guard() takes an agents Model or ModelProvider, not {type(target).__name__}"
    )
