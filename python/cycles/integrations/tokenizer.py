"""Exact prompt counts for the integrations' estimates (docs/integrations.md, "Tokenizers").

Core estimates a prompt as, per message, 4 framing tokens plus ``ceil(chars / 4)`` per text.
A tokenizer replaces the second part only: core lists the texts it counts
(:func:`cycles.pricing.prompt_texts`), the tokenizer counts each, and core adds the framing
(``text_tokens`` of :func:`cycles.pricing.estimate_request`). So which members of a request
are prompt stays core's rule in every language, and an exact count differs from the estimate
by the tokenizer alone.

A guard's ``tokenizer=`` is one of:

- ``"auto"`` (the default): `tiktoken <https://pypi.org/project/tiktoken/>`_ when it is
  installed and maps the model to an encoding (OpenAI's models); otherwise core's estimate.
  tiktoken reads each encoding's file once per process (from ``TIKTOKEN_CACHE_DIR`` or its
  own cache, else it downloads it); when that fails the guard logs one warning on the
  ``cycles`` logger per encoding and uses core's estimate.
- a function of a text returning its token count, used for every model;
- ``None``: core's estimate always.

The provider's reported usage settles the real amount either way: the tokenizer only makes the
reservation closer to it.
"""

from __future__ import annotations

import functools
import logging
import threading
from typing import Any, Callable, Literal, Mapping, Union

from ..errors import InvalidArgumentError
from ..pricing import prompt_texts

__all__ = ["TextCounter", "Tokenizer", "tiktoken_counter", "text_tokens"]

#: Counts the tokens of one text.
TextCounter = Callable[[str], int]

#: A guard's ``tokenizer=``: ``"auto"``, a :data:`TextCounter`, or ``None``.
Tokenizer = Union[Literal["auto"], TextCounter, None]

logger = logging.getLogger("cycles")

_failed: set[str] = set()
_failed_lock = threading.Lock()


@functools.lru_cache(maxsize=64)
def tiktoken_counter(model: str) -> TextCounter | None:
    """tiktoken's count for ``model``, or ``None`` when tiktoken is not installed, does not
    know the model, or cannot load its encoding (logged once per encoding). Special-token
    text in a prompt (``<|endoftext|>``) is counted as ordinary text, as the provider does."""
    try:
        import tiktoken
    except ImportError:
        return None
    try:
        name = tiktoken.encoding_name_for_model(model)
    except KeyError:
        return None  # not an OpenAI model (e.g. Claude): core's estimate
    try:
        encoding = tiktoken.get_encoding(name)
    except Exception as e:  # any load failure falls back: it never fails a call
        with _failed_lock:
            first = name not in _failed
            _failed.add(name)
        if first:
            logger.warning(
                "tiktoken cannot load the %s encoding (%s): prompts of %s are estimated by "
                "core's rule (set TIKTOKEN_CACHE_DIR, or guard(..., tokenizer=None))",
                name,
                e,
                model,
            )
        return None

    def count(text: str) -> int:
        return len(encoding.encode_ordinary(text))

    return count


def check(tokenizer: Any) -> None:
    """Refuses a ``tokenizer=`` that is none of the three kinds."""
    if tokenizer is None or tokenizer == "auto" or callable(tokenizer):
        return
    raise InvalidArgumentError(
        f'tokenizer= must be "auto", a function of a text returning its token count, or None; '
        f"not {tokenizer!r}"
    )


def text_tokens(
    tokenizer: Tokenizer, model: str, request: Mapping[str, Any]
) -> list[list[int]] | None:
    """The counts of the request's prompt texts (core's ``text_tokens``), or ``None`` where
    core's estimate applies. A counter that returns anything but a non-negative ``int`` is
    refused with :class:`~cycles.InvalidArgumentError` before anything is reserved."""
    counter = tiktoken_counter(model) if tokenizer == "auto" else tokenizer
    if counter is None or isinstance(counter, str):
        return None
    out: list[list[int]] = []
    for texts in prompt_texts(request):
        counts = []
        for t in texts:
            n = counter(t)
            if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                raise InvalidArgumentError(
                    f"the tokenizer returned {n!r} for a text; it must return a non-negative int"
                )
            counts.append(n)
        out.append(counts)
    return out
