"""Guard an ``openai`` client: every ``chat.completions.create`` and ``responses.create``
(streamed or not, sync and async) reserves before the request, is capped under
``ALLOW_WITH_CAPS`` and commits the usage the provider reports::

    import openai
    from cycles.integrations.openai import guard

    llm = guard(openai.OpenAI(), cycles=client, pricing=PRICES)
    reply = llm.chat.completions.create(model="gpt-4o-mini", max_tokens=256, messages=[...])

:func:`guard` returns a guarded copy of the client (``client.with_options()``); the client
passed in stays unguarded. The estimate, the caps rewrite, the usage of every response and
stream event and the amount committed are core's (:mod:`cycles.pricing`); the rules are in
``cycles.integrations._guard`` and docs/integrations.md ("Python").

Chat Completions streams report usage only when asked (``stream_options.include_usage``):
the guard asks unless the caller set ``include_usage`` itself (``include_usage=False`` on
:func:`guard` turns this off). The stream then ends with one extra chunk whose ``choices``
is EMPTY and which carries ``usage``: code reading ``chunk.choices[0]`` must skip it. A
stream without usage commits its estimate; one cut before its usage chunk is released.

A call that does not stream is sent through the library's ``with_raw_response`` and parsed
by it as usual: core reads the usage from the body as the provider sent it, and what you
get back is what ``create`` returns. Your own ``with_raw_response`` calls on the guarded
client are guarded too (the raw response is returned as it is, its usage read from its
body). Not guarded: ``with_streaming_response`` (a call through it commits its estimate),
the ``.parse()`` and ``.stream()`` helpers, and every other endpoint.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, TypeVar

try:
    import openai
except ImportError as e:  # pragma: no cover - exercised by a subprocess test
    raise ImportError(
        "cycles.integrations.openai needs the openai package: pip install 'cycles-sdk[openai]'"
    ) from e

from openai.resources.chat import AsyncCompletionsWithRawResponse, CompletionsWithRawResponse
from openai.resources.responses import AsyncResponsesWithRawResponse, ResponsesWithRawResponse

from ..models import SubjectLike
from ..pricing import TOKENS, Api, Pricing, stream_request
from ._guard import Call, CyclesClient, Settings, arun, install, run
from .tokenizer import Tokenizer

__all__ = ["guard"]

_C = TypeVar("_C", openai.OpenAI, openai.AsyncOpenAI)

_OMITTED = (openai.NotGiven, openai.Omit)


def _with_usage(call: Call, kw: dict[str, Any]) -> None:
    """Asks a Chat Completions stream for its usage chunk unless the caller decided (core's
    ``stream_request``)."""
    # Core's rule sets nothing on a request that does not stream: skip the crossing then.
    if call.request.get("stream") not in (None, False):
        kw.update(stream_request(call.api, call.request))


def _sync(
    s: Settings,
    api: Api,
    send: Callable[..., Any],
    send_raw: Callable[..., Any],
    include_usage: bool,
) -> Callable[..., Any]:
    def create(**kw: Any) -> Any:
        call = s.call(api, kw)
        if include_usage:
            _with_usage(call, kw)
        return run(call, kw, send, openai.Stream, send_raw)

    return create


def _async(
    s: Settings,
    api: Api,
    send: Callable[..., Any],
    send_raw: Callable[..., Any],
    include_usage: bool,
) -> Callable[..., Any]:
    async def create(**kw: Any) -> Any:
        call = s.call(api, kw)
        if include_usage:
            _with_usage(call, kw)
        return await arun(call, kw, send, openai.AsyncStream, send_raw)

    return create


def guard(
    client: _C,
    *,
    cycles: CyclesClient,
    pricing: Pricing = TOKENS,
    subject: SubjectLike | None = None,
    action_kind: str = "llm.completion",
    default_output_bound: int | None = None,
    prompt_tokens: Callable[[Mapping[str, Any]], int] | None = None,
    tokenizer: Tokenizer = "auto",
    include_usage: bool = True,
) -> _C:
    """A copy of ``client`` (``openai.OpenAI`` or ``openai.AsyncOpenAI``) whose
    ``chat.completions.create`` and ``responses.create`` are guarded by ``cycles`` (a
    :class:`cycles.Client` or :class:`cycles.AsyncClient`).

    Each call reserves core's estimate (prompt estimate + the request's output bound, else
    ``default_output_bound``; a request with neither raises
    :class:`~cycles.InvalidArgumentError` before anything is sent) priced by ``pricing``
    (default ``{"unit": "TOKENS"}``), as the action ``(action_kind, model)`` for ``subject``
    (default: the Cycles client's tenant). ``tokenizer``: what counts the prompt's
    texts (default ``"auto"``: tiktoken when installed and it knows the model, else core's
    estimate; see :mod:`cycles.integrations.tokenizer`). ``prompt_tokens``: your own count of
    the whole request body, used instead of both. Per call,
    ``cycles=CallOptions(...)`` (or ``**per_call(...)``) overrides the name, kind, subject,
    estimate and idempotency key. A denial raises :class:`~cycles.BudgetExceededError` and
    the provider sees no request; ``caps.max_tokens`` 0 raises
    :class:`~cycles.integrations.CallNotSentError`. ``include_usage``: see the module."""
    s = Settings(
        cycles=cycles,
        pricing=pricing,
        subject=subject,
        action_kind=action_kind,
        default_output_bound=default_output_bound,
        prompt_tokens=prompt_tokens,
        tokenizer=tokenizer,
        omitted=_OMITTED,
    )
    guarded = client.with_options()
    completions, responses = guarded.chat.completions, guarded.responses
    # The raw senders wrap the library's own methods, taken before they are shadowed (the
    # guarded copy's own ``with_raw_response``, built later, wraps the guarded ones).
    if isinstance(guarded, openai.AsyncOpenAI):
        wrap = _async
        raw_create = AsyncCompletionsWithRawResponse(completions).create
        raw_respond = AsyncResponsesWithRawResponse(responses).create
    else:
        wrap = _sync
        raw_create = CompletionsWithRawResponse(completions).create
        raw_respond = ResponsesWithRawResponse(responses).create
    chat = wrap(s, "chat_completions", completions.create, raw_create, include_usage)
    install(completions, "create", chat)
    install(responses, "create", wrap(s, "responses", responses.create, raw_respond, False))
    return guarded
