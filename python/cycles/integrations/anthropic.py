"""Guard an ``anthropic`` client: every ``messages.create`` (streamed or not) and
``messages.stream`` (the context-manager helper), sync and async, reserves before the
request, is capped under ``ALLOW_WITH_CAPS`` and commits the usage the provider reports::

    import anthropic
    from cycles.integrations.anthropic import guard

    llm = guard(anthropic.Anthropic(), cycles=client, pricing=PRICES)
    with llm.messages.stream(model="claude-3-5-haiku-latest", max_tokens=256, messages=[...]) as s:
        text = "".join(s.text_stream)

:func:`guard` returns a guarded copy of the client (``client.with_options()``); the client
passed in stays unguarded. ``messages.stream`` reserves when its ``with`` block is entered
(that is when the request is sent) and settles when the stream ends, is closed or breaks, or
the block exits. Messages streams report the input tokens first (``message_start``), so a
stream cut after it commits those. Everything else is as in
:mod:`cycles.integrations.openai` (docs/integrations.md, "Python"), ``with_raw_response``
included. Not guarded: ``with_streaming_response``, ``messages.parse``, ``count_tokens``,
batches and the ``beta`` resources.
"""

from __future__ import annotations

import types
from typing import Any, Callable, Mapping, TypeVar

try:
    import anthropic
except ImportError as e:  # pragma: no cover - exercised by a subprocess test
    raise ImportError(
        "cycles.integrations.anthropic needs the anthropic package: "
        "pip install 'cycles-sdk[anthropic]'"
    ) from e

from anthropic.resources.messages import AsyncMessagesWithRawResponse, MessagesWithRawResponse

from ..models import SubjectLike
from ..pricing import TOKENS, Pricing
from ._guard import Call, CyclesClient, Settings, arun, install, run
from .tokenizer import Tokenizer

__all__ = ["guard"]

_C = TypeVar("_C", anthropic.Anthropic, anthropic.AsyncAnthropic)

_OMITTED = (anthropic.NotGiven, anthropic.Omit)


class _StreamManager:
    """``messages.stream(...)`` guarded: reserves on entry, then the library's manager."""

    def __init__(self, s: Settings, send: Callable[..., Any], kw: dict[str, Any]) -> None:
        self._call: Call = s.call("messages", kw)  # estimated now: a bad request fails here
        self._send = send
        self._kw = kw
        self._inner: Any = None

    def __enter__(self) -> Any:
        call = self._call
        call.enter()
        try:
            self._inner = self._send(**call.caps(self._kw))
            stream = self._inner.__enter__()  # the request is sent here
            call.wrap_stream(stream._raw_stream)
        except BaseException as e:
            call.end(e)
            raise
        return stream

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: types.TracebackType | None,
    ) -> None:
        try:
            if exc is not None:
                self._call.end(exc)  # the block raised: its usage so far, else release
        finally:
            if self._inner is not None:
                self._inner.__exit__(exc_type, exc, tb)  # closes: settles if not yet


class _AsyncStreamManager:
    """``messages.stream(...)`` of the async client guarded (``async with``)."""

    def __init__(self, s: Settings, send: Callable[..., Any], kw: dict[str, Any]) -> None:
        self._call: Call = s.call("messages", kw)
        self._send = send
        self._kw = kw
        self._inner: Any = None

    async def __aenter__(self) -> Any:
        call = self._call
        await call.aenter()
        try:
            self._inner = self._send(**(await call.acaps(self._kw)))
            stream = await self._inner.__aenter__()
            call.wrap_async_stream(stream._raw_stream)
        except BaseException as e:
            await call.aend(e)
            raise
        return stream

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: types.TracebackType | None,
    ) -> None:
        try:
            if exc is not None:
                await self._call.aend(exc)
        finally:
            if self._inner is not None:
                await self._inner.__aexit__(exc_type, exc, tb)


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
) -> _C:
    """A copy of ``client`` (``anthropic.Anthropic`` or ``anthropic.AsyncAnthropic``) whose
    ``messages.create`` and ``messages.stream`` are guarded by ``cycles``. The arguments
    are :func:`cycles.integrations.openai.guard`'s (Messages requests always carry
    ``max_tokens``, so ``default_output_bound`` is rarely needed)."""
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
    messages = guarded.messages
    create, stream = messages.create, messages.stream
    # As in the openai guard: a call that does not stream goes through the library's raw
    # sender (taken before ``create`` is shadowed), so core reads the body as sent.
    if isinstance(guarded, anthropic.AsyncAnthropic):
        araw = AsyncMessagesWithRawResponse(messages).create

        async def acreate(**kw: Any) -> Any:
            call = s.call("messages", kw)
            return await arun(call, kw, create, anthropic.AsyncStream, araw)

        def astream(**kw: Any) -> _AsyncStreamManager:
            return _AsyncStreamManager(s, stream, kw)

        install(messages, "create", acreate)
        install(messages, "stream", astream)
    else:
        raw = MessagesWithRawResponse(messages).create

        def screate(**kw: Any) -> Any:
            return run(s.call("messages", kw), kw, create, anthropic.Stream, raw)

        def sstream(**kw: Any) -> _StreamManager:
            return _StreamManager(s, stream, kw)

        install(messages, "create", screate)
        install(messages, "stream", sstream)
    return guarded
