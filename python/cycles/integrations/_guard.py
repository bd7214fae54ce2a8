"""What every integration does around one provider call (docs/integrations.md, "Python").

The amounts and the provider's formats are core's (:mod:`cycles.pricing`): the estimate
(``estimate_request``, with a tokenizer's counts of the prompt's texts where one applies, or
``estimate`` of your own exact prompt count), the caps rewrite
(:meth:`~cycles.GuardedReservation.plan_caps`), the usage of each body or stream event
(``usage``), the actual (``actual``) and what to do at the end (``settlement``), held per
call by core's meter (the bridge's ``ProviderCall``, one crossing a step). This module only
drives the guarded lifecycle (:meth:`cycles.Client.reserve`) in that order:

1. estimate, then reserve it in the pricing's unit (a denial raises
   :class:`~cycles.BudgetExceededError` and nothing is sent);
2. under ``ALLOW_WITH_CAPS``, rewrite the request (a plan with ``send`` False releases and
   raises :class:`CallNotSentError`: nothing is sent);
3. call the provider; fold the usage of the response, or of every stream event in order
   (the actual so far is reported to the reservation as it grows, so even an abandoned
   stream settles what was reported);
4. settle as core's ``settlement`` says: the actual is committed (also when the call then
   failed), a failed call with no usage is released, a call that succeeded with no usage
   commits the estimate.

A stream keeps its reservation (and heartbeat) until it is exhausted, closed or breaks. A
stream closed before its end counts as a call that succeeded: its usage so far is committed,
or the estimate when it reported none (the provider may have produced up to the bound).
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Callable, Union, cast

from .. import _native
from .._requests import _part
from ..client import AsyncClient, Client
from ..errors import InvalidArgumentError
from ..lifecycle import CallNotSentError, GuardedReservation, ReservationContext, _int64
from ..models import Amount, Decision, Subject, SubjectLike
from ..pricing import (
    Api,
    CapsPlan,
    Pricing,
    Usage,
    _dumps,
    _parsed,
    estimate,
    output_bound,
)
from .tokenizer import Tokenizer, text_tokens
from .tokenizer import check as check_tokenizer

__all__ = ["CallOptions", "CallNotSentError", "per_call", "OPTION", "CyclesClient"]

logger = logging.getLogger("cycles")

#: The keyword a guarded call takes its per-call options from (popped before the provider
#: library sees the call).
OPTION = "cycles"

#: A Cycles client of either kind: both serve sync and async calls.
CyclesClient = Union[Client, AsyncClient]

# The client libraries' own keywords (the Stainless-generated openai and anthropic share
# them): not part of the request body. ``extra_body`` is merged into the body.
_NOT_BODY = ("extra_headers", "extra_query", "extra_body", "timeout")

# The header those libraries' ``with_raw_response`` sets: such a call returns the raw
# response to its caller, so the guard must not parse it.
_RAW_HEADER = "X-Stainless-Raw-Response"


# Types of keyword values that are never iterators (exact types: a subclass may be one).
_PLAIN = frozenset((str, int, float, bool, list, dict, tuple, type(None)))


def _caller_wants_raw(kw: Mapping[str, Any]) -> bool:
    headers = kw.get("extra_headers")
    return isinstance(headers, Mapping) and headers.get(_RAW_HEADER) is not None


@dataclass(frozen=True)
class CallOptions:
    """Per-call overrides of a guarded call: the action's ``name`` (default: the model) and
    ``kind``, the ``subject``, the ``estimate`` (an ``int`` in the pricing's unit or an
    :class:`~cycles.models.Amount` in it; default: core's estimate) and the reservation's
    ``idempotency_key`` (default: a fresh one). Pass them as ``cycles=CallOptions(...)``, or
    as ``**per_call(...)`` in type-checked code (the library's signature has no such
    keyword)."""

    name: str | None = None
    kind: str | None = None
    subject: SubjectLike | None = None
    estimate: int | Amount | None = None
    idempotency_key: str | None = None


def per_call(
    *,
    name: str | None = None,
    kind: str | None = None,
    subject: SubjectLike | None = None,
    estimate: int | Amount | None = None,
    idempotency_key: str | None = None,
) -> dict[str, Any]:
    """``{"cycles": CallOptions(...)}``, to spread into a guarded call:
    ``client.chat.completions.create(model=..., messages=..., **per_call(name="summary"))``."""
    return {OPTION: CallOptions(name, kind, subject, estimate, idempotency_key)}


# A call without options shares this one (it is frozen).
_NO_OPTIONS = CallOptions()


def _options(kw: dict[str, Any]) -> CallOptions:
    o = kw.pop(OPTION, None)
    if o is None:
        return _NO_OPTIONS
    if isinstance(o, CallOptions):
        return o
    if isinstance(o, Mapping):
        try:
            return CallOptions(**o)
        except TypeError as e:
            raise InvalidArgumentError(f"{OPTION}=: {e}") from None
    raise InvalidArgumentError(f"{OPTION}= must be a CallOptions or a mapping, not {o!r}")


def _body(obj: Any) -> Mapping[str, Any] | None:
    """A response or stream event as its JSON body (the libraries return pydantic models)."""
    if isinstance(obj, Mapping):
        return obj
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        d = dump(mode="json", exclude_unset=True)
        return d if isinstance(d, Mapping) else None
    return None


def _raw_body(response: Any) -> str | None:
    """The body of a raw response (the libraries' ``LegacyAPIResponse``, what
    ``with_raw_response`` returns) of a call that did not stream, as the provider sent it;
    ``None`` for anything else or a body not yet read."""
    http = getattr(response, "http_response", None)
    if http is None or not callable(getattr(response, "parse", None)):
        return None
    try:
        content = http.content  # read already unless the response streams
        return content.decode("utf-8") if isinstance(content, bytes) else None
    except Exception:  # not read (a stream), not UTF-8: no usage from it
        return None


@dataclass(frozen=True)
class Settings:
    """One guard's configuration (see each integration's ``guard``)."""

    cycles: CyclesClient
    pricing: Pricing
    subject: SubjectLike | None
    action_kind: str
    default_output_bound: int | None
    prompt_tokens: Callable[[Mapping[str, Any]], int] | None
    #: The library's "not given" sentinels (left out of the request body).
    omitted: tuple[type, ...]
    #: Counts the prompt's texts (:mod:`cycles.integrations.tokenizer`).
    tokenizer: Tokenizer = "auto"
    #: ``pricing`` parsed by core once here instead of on every crossing into it: the pricing
    #: is read when the client is guarded (a later change to the mapping is not seen).
    parsed_pricing: _native.ParsedPricing = field(init=False)
    #: ``subject`` in its wire form, encoded once here (a call's own subject is encoded per
    #: call).
    subject_json: Any = field(init=False)

    def __post_init__(self) -> None:
        if not isinstance(self.cycles, (Client, AsyncClient)):
            raise InvalidArgumentError(
                f"cycles= must be a cycles.Client or cycles.AsyncClient, not {self.cycles!r}"
            )
        if not isinstance(self.pricing, Mapping) or not isinstance(self.pricing.get("unit"), str):
            raise InvalidArgumentError(
                'pricing= must be a cycles.pricing.Pricing ({"unit": ..., ...})'
            )
        if self.prompt_tokens is not None and not callable(self.prompt_tokens):
            raise InvalidArgumentError("prompt_tokens= must be a function of the request")
        check_tokenizer(self.tokenizer)
        object.__setattr__(self, "parsed_pricing", _parsed(self.pricing))
        subject = None if self.subject is None else _part(self.subject, Subject, "subject")
        object.__setattr__(self, "subject_json", subject)

    def call(self, api: Api, kw: dict[str, Any]) -> Call:
        """A call of ``api`` with the library keywords ``kw`` (the options popped)."""
        return Call(self, api, kw, _options(kw))


class Call:
    """One guarded provider call: estimate, reservation, caps, usage, settlement. Core's
    meter of the call (the bridge's ``ProviderCall``) holds the usage, whether a body said
    the call failed, and the actual, and reports each grown actual to the reservation; the
    end applies core's settlement rule in the crossing that ends the reservation."""

    def __init__(self, s: Settings, api: Api, kw: dict[str, Any], opts: CallOptions) -> None:
        self.s = s
        self.api = api
        for k, v in kw.items():
            # e.g. a generator of messages: read once, kept. The common types are skipped
            # first: the Iterator check is an ABC's, run in Python for every keyword.
            if type(v) not in _PLAIN and isinstance(v, Iterator):
                kw[k] = list(v)
        model = kw.get("model")
        if not isinstance(model, str):
            raise InvalidArgumentError(f"model must be a string, not {model!r}")
        self.model = model
        self.request = self._request(kw)
        self.meter = self._meter(opts)
        # The spec's parts in wire form: no Amount or Action object is built per call.
        self.ctx: ReservationContext = s.cycles._reserve_spec(
            {
                "idempotency_key": opts.idempotency_key,
                "subject": s.subject_json
                if opts.subject is None
                else _part(opts.subject, Subject, "subject"),
                "action": {"kind": opts.kind or s.action_kind, "name": opts.name or model},
                "estimate": {"unit": s.parsed_pricing.unit, "amount": self.meter.estimate},
            }
        )
        self._r: GuardedReservation | None = None
        self.done = False

    def _request(self, kw: Mapping[str, Any]) -> dict[str, Any]:
        body = {
            k: v for k, v in kw.items() if k not in _NOT_BODY and not isinstance(v, self.s.omitted)
        }
        extra = kw.get("extra_body")
        if isinstance(extra, Mapping):
            body.update(extra)
        return body

    def _meter(self, opts: CallOptions) -> _native.NativeProviderCall:
        """Core's meter of this call, with its estimate: core's of the request (one
        crossing), or the caller's own."""
        p = self.s.parsed_pricing
        e = opts.estimate
        if e is not None:
            unit = None  # the pricing's; an Amount's own unit is checked against it by core
            if isinstance(e, Amount):
                unit, e = e.unit, e.amount
            if isinstance(e, bool) or not isinstance(e, int):
                raise InvalidArgumentError(f"estimate must be an int or an Amount, not {e!r}")
            return _native.NativeProviderCall.with_estimate(
                p, self.api, self.model, _int64(e, "the estimate"), unit
            )
        default = self.s.default_output_bound
        if self.s.prompt_tokens is not None:
            bound = output_bound(self.request, default)
            if bound is not None:
                n = self.s.prompt_tokens(self.request)
                # The parsed table stands in for the mapping (pricing._call takes either).
                amount = estimate(cast(Pricing, p), self.model, n, bound).amount
                return _native.NativeProviderCall.with_estimate(p, self.api, self.model, amount)
            # No bound: core's estimate of the request says why it cannot reserve.
        counts = text_tokens(self.s.tokenizer, self.model, self.request)
        return _native.NativeProviderCall.for_request(
            p,
            self.api,
            self.model,
            _dumps(self.request, "the request"),
            default,
            None if counts is None else json.dumps(counts),
        )

    @property
    def r(self) -> GuardedReservation:
        if self._r is None:
            raise InvalidArgumentError("the guarded call has not reserved yet")
        return self._r

    # --- reserve, caps ---

    def enter(self) -> None:
        self._r = self.ctx.__enter__()

    async def aenter(self) -> None:
        self._r = await self.ctx.__aenter__()

    def _plan(self) -> CapsPlan | None:
        if self.r.decision != Decision.ALLOW_WITH_CAPS:
            return None
        return self.r.plan_caps(self.api, self.request)

    def caps(self, kw: dict[str, Any]) -> dict[str, Any]:
        """``kw`` rewritten under the caps; raises :class:`CallNotSentError` (released)."""
        plan = self._plan()
        if plan is None or not plan.changed:
            return kw
        if not plan.send:
            e = self.r.refuse_call()
            e.plan = plan
            raise e
        return plan.apply(kw)

    async def acaps(self, kw: dict[str, Any]) -> dict[str, Any]:
        plan = self._plan()
        if plan is None or not plan.changed:
            return kw
        if not plan.send:
            e = await self.r.arefuse_call()
            e.plan = plan
            raise e
        return plan.apply(kw)

    # --- usage ---

    @property
    def streams(self) -> bool:
        """Whether the request asks for a stream (its body is events, not one JSON body)."""
        return self.request.get("stream") not in (None, False)

    def read_as(self, api: Api) -> None:
        """Reads the bodies and events that follow as ``api``'s (a library that converts
        the provider's stream into another API's events)."""
        self.meter.read_as(api)
        self.api = api

    def observe(self, obj: Any) -> None:
        """Folds one response or stream event into the usage; reports a grown actual."""
        body = _body(obj)
        if body is not None:
            self.meter.observe(_dumps(body, "the response body"), self.r._native)

    def observe_raw(self, response: Any) -> bool:
        """Folds a raw response's body as the provider sent it (not decoded and re-encoded
        in Python); False when there is none or core cannot read it (e.g. not JSON)."""
        body = None if self.streams else _raw_body(response)
        if body is None:
            return False
        try:
            self.meter.observe(body, self.r._native)
        except InvalidArgumentError:
            return False
        return True

    def observe_usage(self, u: Usage) -> None:
        """Takes ``u`` as the usage so far; reports its actual when it changed."""
        try:
            self.meter.take_usage(u.input_tokens, u.output_tokens, self.r._native)
        except (OverflowError, TypeError):
            raise InvalidArgumentError(
                f"usage counts must be non-negative ints or None, not {u!r}"
            ) from None

    # --- settle ---

    def end(self, exc: BaseException | None) -> None:
        """Settles once by core's rule: ``exc`` is the call's exception (``None``: it
        returned; a body that said the call failed counts as failed all the same)."""
        if self.done or self._r is None:
            return
        self.done = True
        self.ctx._end_call(self.meter, exc)

    async def aend(self, exc: BaseException | None) -> None:
        if self.done or self._r is None:
            return
        self.done = True
        await self.ctx._aend_call(self.meter, exc)

    # --- streams ---

    def wrap_stream(self, stream: Any) -> Any:
        """Keeps the reservation for the library's ``Stream`` (or ``MessageStream``'s raw
        stream): every event is folded as it is read; the end, a break or ``close()``
        settles. The object returned is the library's own, its iterator wrapped."""
        inner: Iterator[Any] = stream._iterator
        call = self

        def events() -> Iterator[Any]:
            try:
                for item in inner:
                    call.observe(item)
                    yield item
            except GeneratorExit:
                call.end(None)  # abandoned (collected unclosed): as closed
                raise
            except BaseException as e:
                call.end(e)
                raise
            call.end(None)

        close = stream.close

        def guarded_close() -> None:
            try:
                close()
            finally:
                call.end(None)

        stream._iterator = events()
        stream.close = guarded_close
        return stream

    def wrap_async_stream(self, stream: Any) -> Any:
        """:meth:`wrap_stream` for the library's ``AsyncStream``."""
        inner: AsyncIterator[Any] = stream._iterator
        call = self

        async def events() -> AsyncIterator[Any]:
            try:
                async for item in inner:
                    call.observe(item)
                    yield item
            except GeneratorExit:
                await call.aend(None)
                raise
            except BaseException as e:
                await call.aend(e)
                raise
            await call.aend(None)

        close = stream.close

        async def guarded_close() -> None:
            try:
                await close()
            finally:
                await call.aend(None)

        stream._iterator = events()
        stream.close = guarded_close
        return stream


def install(resource: Any, method: str, fn: Callable[..., Any]) -> None:
    """Shadows ``resource.method`` with ``fn`` on this instance only (the guarded copy's)."""
    setattr(resource, method, fn)


def _fold_result(call: Call, result: Any) -> None:
    """Folds what a call returned (not a stream): the library's model, or a raw response
    (the caller's own ``with_raw_response``), read as sent."""
    if not call.observe_raw(result):
        call.observe(result)


def _fold_raw(call: Call, raw: Any) -> Any:
    """Folds the guard's own raw response, then returns the library's parse of it (the usage
    is folded first: a parse that fails still settles what the provider reported)."""
    folded = call.observe_raw(raw)
    result = raw.parse()
    if not folded:
        call.observe(result)
    return result


async def _afold_raw(call: Call, raw: Any) -> Any:
    """:func:`_fold_raw` for the async clients (anthropic's async raw response parses in a
    coroutine, openai's does not)."""
    folded = call.observe_raw(raw)
    result = raw.parse()
    if inspect.isawaitable(result):
        result = await result
    if not folded:
        call.observe(result)
    return result


def run(
    call: Call,
    kw: dict[str, Any],
    send: Callable[..., Any],
    stream_cls: type,
    send_raw: Callable[..., Any] | None = None,
) -> Any:
    """The sync guarded call: reserve, caps, send, then settle or hand the stream over.
    ``send_raw``: the library's ``with_raw_response`` of ``send``; a call that does not
    stream goes through it, so core reads the body as the provider sent it and the caller
    gets the library's parse of it, as from ``send``."""
    call.enter()
    try:
        kw = call.caps(kw)
        if send_raw is not None and not call.streams and not _caller_wants_raw(kw):
            result = _fold_raw(call, send_raw(**kw))
        else:
            result = send(**kw)
            if isinstance(result, stream_cls):
                return call.wrap_stream(result)
            _fold_result(call, result)
    except BaseException as e:
        call.end(e)
        raise
    call.end(None)
    return result


async def arun(
    call: Call,
    kw: dict[str, Any],
    send: Callable[..., Any],
    stream_cls: type,
    send_raw: Callable[..., Any] | None = None,
) -> Any:
    """:func:`run` for the async clients."""
    await call.aenter()
    try:
        kw = await call.acaps(kw)
        if send_raw is not None and not call.streams and not _caller_wants_raw(kw):
            result = await _afold_raw(call, await send_raw(**kw))
        else:
            result = await send(**kw)
            if isinstance(result, stream_cls):
                return call.wrap_async_stream(result)
            _fold_result(call, result)
    except BaseException as e:
        await call.aend(e)
        raise
    await call.aend(None)
    return result
