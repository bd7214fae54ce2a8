"""Core's pricing functions: what an integration reserves, commits and rewrites.

Every function here is one call of the Rust core (``core/src/pricing``) through the bridge's
JSON table (``bindings/bridge/src/pricing_json.rs``): Python computes nothing of its own, so
Python, Node and every other face charge the same amount for the same call. The rules are in
docs/integrations.md ("Estimate, price, caps: the core functions"); the shared vectors
``conformance/vectors/pricing.json`` pin them, and this package's tests run every vector
through the functions below.

A **pricing** is ``{"unit": "TOKENS"}`` (cost = tokens, no table) or a table of integer
prices per million tokens in the budget's unit::

    PRICES: Pricing = {
        "unit": "USD_MICROCENTS",
        "models": {"gpt-4o-mini": {"input_per_mtok": 15_000_000, "output_per_mtok": 60_000_000}},
        "default": {"input_per_mtok": 100_000_000, "output_per_mtok": 400_000_000},
    }

A request or response is the provider's JSON body as a mapping (what you pass to the client
library, or ``model_dump()`` of what it returns). ``api`` is ``"chat_completions"`` (OpenAI
Chat Completions), ``"responses"`` (OpenAI Responses) or ``"messages"`` (Anthropic
Messages). Token counts and amounts are ``int``; results are small frozen dataclasses.
Every invalid argument (an unknown model without a default price, a negative count, a bad
``max_tokens``, an unknown ``api``) raises core's :class:`~cycles.InvalidArgumentError` with
core's message, the same text in every language.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal, Mapping, Sequence, TypedDict, Union

from . import _native
from .errors import InvalidArgumentError
from .models import Amount, Caps

__all__ = [
    "Api",
    "ModelPrice",
    "Pricing",
    "TOKENS",
    "CapsLike",
    "PriceMatch",
    "RequestEstimate",
    "SettlementPlan",
    "LoweredBound",
    "ToolFilter",
    "CapsPlan",
    "Usage",
    "Observation",
    "text_tokens",
    "prompt_texts",
    "prompt_tokens",
    "output_bound",
    "lookup_price",
    "cost",
    "estimate",
    "estimate_request",
    "actual",
    "settlement",
    "lower_bound",
    "tool_allowed",
    "filter_tools",
    "plan_caps",
    "usage",
    "stream_request",
    "call_failed",
    "observe",
]

#: A provider API whose wire format core knows.
Api = Literal["chat_completions", "responses", "messages"]


class ModelPrice(TypedDict):
    """One model's price: integers per million tokens in the pricing's unit."""

    input_per_mtok: int
    output_per_mtok: int


class _PricingUnit(TypedDict):
    unit: str


class Pricing(_PricingUnit, total=False):
    """A pricing: ``{"unit": "TOKENS"}``, or a unit with ``models`` (exact names, dated ids
    fall back to their undated name, ``"prefix*"`` patterns, longest first) and/or a
    ``default`` price. Core validates it (unknown members, negative or fractional prices, a
    ``TOKENS`` table and a table with neither models nor default are refused)."""

    models: Mapping[str, ModelPrice]
    default: ModelPrice


#: The pricing that needs no table: the budget is in ``TOKENS``, cost = input + output.
TOKENS: Pricing = {"unit": "TOKENS"}

#: Caps as the server sent them (:class:`~cycles.models.Caps`) or as a mapping of its fields.
CapsLike = Union[Caps, Mapping[str, Any]]

# Counts beyond 2^53 - 1 cross as decimal strings (the vectors' encoding), both ways.
_MAX_EXACT = 2**53 - 1


def _count_in(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > _MAX_EXACT:
        return str(value)
    return value


def _int_out(value: Any) -> Any:
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)
    return value


def _json_default(value: Any) -> Any:
    # Pydantic models (what the provider libraries return, and their typed params).
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_unset=True)
    raise TypeError(f"{type(value).__name__} is not JSON-serialisable")


# One encoder for every call: ``json.dumps`` with any option builds a new one each time.
_ENCODER = json.JSONEncoder(allow_nan=False, default=_json_default, separators=(",", ":"))


def _dumps(value: Any, what: str) -> str:
    try:
        return _ENCODER.encode(value)
    except (TypeError, ValueError) as e:
        raise InvalidArgumentError(f"{what} is not JSON-serialisable: {e}") from None


def _parsed(pricing: Pricing) -> _native.ParsedPricing:
    """``pricing`` parsed once by core, to pass as the ``pricing`` of this module's functions
    where one table prices many calls (a guard's): each call then skips encoding and parsing
    the table again. A bad pricing raises :class:`~cycles.errors.InvalidArgumentError` here."""
    return _native.ParsedPricing(_dumps(pricing, "pricing="))


def _call(name: str, args: Mapping[str, Any]) -> Any:
    what = f"an argument of {name}"
    parsed = args.get("pricing")
    if isinstance(parsed, _native.ParsedPricing):
        rest = {k: v for k, v in args.items() if k != "pricing"}
        return json.loads(parsed.call(name, _dumps(rest, what)))
    return json.loads(_native.pricing_call(name, _dumps(args, what)))


def _caps(caps: CapsLike) -> Any:
    return caps.to_json() if isinstance(caps, Caps) else caps


def _amount(d: Mapping[str, Any]) -> Amount:
    return Amount(d["unit"], _int_out(d["amount"]))


def _amount_in(a: Amount | None) -> Any:
    if a is None:
        return None
    if isinstance(a, Amount):
        return {"unit": a.unit, "amount": _count_in(a.amount)}
    return a  # core says what is wrong with it


@dataclass(frozen=True)
class PriceMatch:
    """A model's price: ``matched`` is the table key that matched (``None``: the default)."""

    matched: str | None
    input_per_mtok: int
    output_per_mtok: int


@dataclass(frozen=True)
class RequestEstimate:
    """What a request reserves: its prompt estimate, its output bound and their cost."""

    prompt_tokens: int
    output_bound: int
    amount: Amount


@dataclass(frozen=True)
class SettlementPlan:
    """What to do at the end of a call: ``action`` ``"commit"`` (``amount``) or
    ``"release"`` (``amount`` is ``None``)."""

    action: Literal["commit", "release"]
    amount: Amount | None = None


@dataclass(frozen=True)
class LoweredBound:
    """An output bound under caps; ``changed`` says whether to rewrite the request."""

    bound: int | None
    changed: bool


@dataclass(frozen=True)
class ToolFilter:
    """Tool names the caps allow and remove, each in the request's order."""

    allowed: tuple[str, ...]
    removed: tuple[str, ...]


@dataclass(frozen=True)
class CapsPlan:
    """The caps rewrite of one provider request (core's ``wire::plan_caps``).

    Set each member of :attr:`set` on the request and remove each of :attr:`unset`
    (:meth:`apply` does exactly that). ``bound_from`` / ``bound_to`` are the output bound
    before and after (``None``: none); ``removed_tools`` names the tools the caps took out;
    ``send`` is False when the call must not be made (a cap of 0); ``changed`` says whether
    the request changes at all."""

    bound_from: int | None
    bound_to: int | None
    set: Mapping[str, Any]
    unset: tuple[str, ...]
    removed_tools: tuple[str, ...]
    send: bool
    changed: bool

    def apply(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """A copy of ``request`` (the keyword arguments of the library call, or its JSON
        body) with :attr:`set` set and :attr:`unset` removed."""
        out = dict(request)
        out.update(self.set)
        for name in self.unset:
            out.pop(name, None)
        return out

    @classmethod
    def _from_json(cls, d: Mapping[str, Any]) -> CapsPlan:
        return cls(
            bound_from=_int_out(d["bound_from"]),
            bound_to=_int_out(d["bound_to"]),
            set=dict(d["set"]),
            unset=tuple(d["unset"]),
            removed_tools=tuple(d["removed_tools"]),
            send=bool(d["send"]),
            changed=bool(d["changed"]),
        )


@dataclass(frozen=True)
class Usage:
    """Token usage a provider reported (``None``: that half was not reported)."""

    input_tokens: int | None = None
    output_tokens: int | None = None

    @property
    def reported(self) -> bool:
        """True when the provider reported either half."""
        return self.input_tokens is not None or self.output_tokens is not None

    def _to_json(self) -> dict[str, Any]:
        return {
            "input_tokens": _count_in(self.input_tokens),
            "output_tokens": _count_in(self.output_tokens),
        }

    @classmethod
    def _from_json(cls, d: Mapping[str, Any]) -> Usage:
        return cls(_int_out(d.get("input_tokens")), _int_out(d.get("output_tokens")))


def _usage_in(u: Usage | Mapping[str, Any] | None) -> Any:
    if isinstance(u, Usage):
        return u._to_json()
    if isinstance(u, Mapping):
        return {k: _count_in(v) for k, v in u.items()}
    return u


@dataclass(frozen=True)
class Observation:
    """One response body or stream event folded (:func:`observe`): the ``usage`` so far,
    whether the body says the call ``failed`` (:func:`call_failed`), and the ``actual`` of
    that usage (``None``: nothing reported yet)."""

    usage: Usage
    failed: bool
    actual: Amount | None


def text_tokens(text: str) -> int:
    """The estimate of one text: ``ceil(chars / 4)``, chars being Unicode scalar values
    (``len(text)``)."""
    return int(_int_out(_call("text_tokens", {"text": text})))


def prompt_texts(request: Mapping[str, Any]) -> list[list[str]]:
    """The texts of a provider request a tokenizer counts: one list per message, its texts in
    order (docs/integrations.md, "The prompt estimate"). Count each and pass the counts, in
    this shape, as ``text_tokens`` to :func:`prompt_tokens` or :func:`estimate_request`."""
    return [list(m) for m in _call("prompt_texts", {"request": request})]


def _text_tokens_in(text_tokens: Sequence[Sequence[int]] | None, args: dict[str, Any]) -> None:
    if text_tokens is not None:
        args["text_tokens"] = [[_count_in(n) for n in m] for m in text_tokens]


def prompt_tokens(
    request: Mapping[str, Any], text_tokens: Sequence[Sequence[int]] | None = None
) -> int:
    """The prompt of a provider request: per message, 4 + the tokens of its texts
    (docs/integrations.md, "The prompt estimate"). The tokens of a text are core's estimate
    ``ceil(chars / 4)``, or, given ``text_tokens`` (a tokenizer's counts of
    :func:`prompt_texts`, in its shape), those counts."""
    args: dict[str, Any] = {"request": request}
    _text_tokens_in(text_tokens, args)
    return int(_int_out(_call("prompt_tokens", args)))


def output_bound(request: Mapping[str, Any], default: int | None = None) -> int | None:
    """The request's output bound: the smallest present of ``max_tokens``,
    ``max_completion_tokens``, ``max_output_tokens``, else ``default``, else ``None``."""
    args: dict[str, Any] = {"request": request}
    if default is not None:
        args["default"] = _count_in(default)
    return _int_out(_call("output_bound", args))  # type: ignore[no-any-return]


def lookup_price(pricing: Pricing, model: str) -> PriceMatch:
    """The price of ``model`` in a table (exact name, undated name, longest ``P*`` pattern,
    default; an unknown model without a default is an error, never free)."""
    d = _call("lookup_price", {"pricing": pricing, "model": model})
    return PriceMatch(d["matched"], d["input_per_mtok"], d["output_per_mtok"])


def cost(pricing: Pricing, model: str, input_tokens: int, output_tokens: int) -> Amount:
    """``ceil((input x input_per_mtok + output x output_per_mtok) / 10^6)`` in the pricing's
    unit (``TOKENS``: input + output)."""
    args = {
        "pricing": pricing,
        "model": model,
        "input_tokens": _count_in(input_tokens),
        "output_tokens": _count_in(output_tokens),
    }
    return _amount(_call("cost", args))


def estimate(pricing: Pricing, model: str, prompt_tokens: int, output_bound: int) -> Amount:
    """The cost of a call's prompt estimate and output bound: what it reserves (e.g. with an
    exact prompt count of your own tokenizer)."""
    args = {
        "pricing": pricing,
        "model": model,
        "prompt_tokens": _count_in(prompt_tokens),
        "output_bound": _count_in(output_bound),
    }
    return _amount(_call("estimate", args))


def estimate_request(
    pricing: Pricing,
    model: str,
    request: Mapping[str, Any],
    default_output_bound: int | None = None,
    text_tokens: Sequence[Sequence[int]] | None = None,
) -> RequestEstimate:
    """What a provider request reserves: its prompt (:func:`prompt_tokens`, with
    ``text_tokens`` when a tokenizer counted it) plus its output bound (else
    ``default_output_bound``; neither is an error), priced."""
    args: dict[str, Any] = {"pricing": pricing, "model": model, "request": request}
    if default_output_bound is not None:
        args["default_output_bound"] = _count_in(default_output_bound)
    _text_tokens_in(text_tokens, args)
    d = _call("estimate_request", args)
    return RequestEstimate(
        _int_out(d["prompt_tokens"]), _int_out(d["output_bound"]), _amount(d["amount"])
    )


def actual(pricing: Pricing, model: str, usage: Usage | Mapping[str, Any]) -> Amount | None:
    """The cost of what the provider reported and nothing else (an unreported half is 0;
    nothing reported is ``None``, no actual)."""
    d = _call("actual", {"pricing": pricing, "model": model, "usage": _usage_in(usage)})
    return None if d is None else _amount(d)


def settlement(actual: Amount | None, call_succeeded: bool, estimate: Amount) -> SettlementPlan:
    """How a call ends: an actual is committed (also when the call failed); no actual and
    the call failed: release; no actual and the call succeeded: commit the estimate."""
    args = {
        "actual": _amount_in(actual),
        "call_succeeded": call_succeeded,
        "estimate": _amount_in(estimate),
    }
    d = _call("settlement", args)
    if d["action"] == "commit":
        return SettlementPlan("commit", _amount(d["amount"]))
    return SettlementPlan("release")


def lower_bound(bound: int | None, caps: CapsLike) -> LoweredBound:
    """``min(bound, caps.max_tokens)`` (no bound: the cap; no cap: unchanged)."""
    d = _call("lower_bound", {"bound": _count_in(bound), "caps": _caps(caps)})
    return LoweredBound(_int_out(d["bound"]), bool(d["changed"]))


def tool_allowed(name: str, caps: CapsLike) -> bool:
    """Whether the caps allow the tool ``name`` (the spec's allowlist/denylist precedence)."""
    return bool(_call("tool_allowed", {"name": name, "caps": _caps(caps)}))


def filter_tools(tools: Sequence[str], caps: CapsLike) -> ToolFilter:
    """The tool names the caps allow and remove, in ``tools``' order."""
    d = _call("filter_tools", {"tools": list(tools), "caps": _caps(caps)})
    return ToolFilter(tuple(d["allowed"]), tuple(d["removed"]))


def plan_caps(api: Api, request: Mapping[str, Any], caps: CapsLike) -> CapsPlan:
    """The caps rewrite of a provider request (its bound fields lowered, tools filtered).
    Inside a guarded action use :meth:`~cycles.GuardedReservation.plan_caps`, which takes the
    action's own caps and reports the rewrite as the ``caps_applied`` event."""
    return CapsPlan._from_json(
        _call("plan_caps", {"api": api, "request": request, "caps": _caps(caps)})
    )


def usage(
    api: Api, body: Mapping[str, Any], usage: Usage | Mapping[str, Any] | None = None
) -> Usage:
    """Folds one response body or stream event into the usage so far (``usage``; present
    counts replace earlier ones, providers report cumulative counts)."""
    args: dict[str, Any] = {"api": api, "body": body}
    if usage is not None:
        args["usage"] = _usage_in(usage)
    return Usage._from_json(_call("usage", args))


def stream_request(api: Api, request: Mapping[str, Any]) -> dict[str, Any]:
    """The members to set on ``request`` so that, when it streams (``stream=True``), it
    reports its usage: Chat Completions' ``stream_options.include_usage`` unless the caller
    set it; empty when nothing changes (core's ``wire::stream_request``)."""
    return dict(_call("stream_request", {"api": api, "request": request})["set"])


def call_failed(api: Api, body: Mapping[str, Any]) -> bool:
    """Whether a response body or stream event says the call failed although the HTTP
    exchange succeeded (Responses ``error`` / ``response.failed``, Messages ``error``, a Chat
    Completions chunk carrying ``error``): such a call settles as failed."""
    return bool(_call("call_failed", {"api": api, "body": body}))


def observe(
    pricing: Pricing,
    model: str,
    api: Api,
    body: Mapping[str, Any],
    usage: Usage | Mapping[str, Any] | None = None,
) -> Observation:
    """:func:`usage`, :func:`call_failed` and :func:`actual` of one response body or stream
    event in one call of core, as an integration folds every body it reads (the body crosses
    to core once instead of three times)."""
    args: dict[str, Any] = {"pricing": pricing, "model": model, "api": api, "body": body}
    if usage is not None:
        args["usage"] = _usage_in(usage)
    d = _call("observe", args)
    a = d["actual"]
    return Observation(
        Usage._from_json(d["usage"]), bool(d["failed"]), None if a is None else _amount(a)
    )
