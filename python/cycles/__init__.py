"""Cycles: runtime budget authority for AI agents.

The Python binding of the Cycles SDK. Every behaviour lives in the Rust core
(``cycles-core``); this package gives it Python types, exceptions and asyncio.

- :class:`Client` / :class:`AsyncClient`: every runtime operation, one HTTP attempt each,
  typed results (:mod:`cycles.models`) and one exception hierarchy (:mod:`cycles.errors`).
- :meth:`Client.reserve` / :meth:`Client.stream` (``with`` / ``async with``),
  :meth:`Client.guarded` (a decorator for sync and async functions) and
  :func:`current_reservation`: the guarded lifecycle (:mod:`cycles.lifecycle`).
- :mod:`cycles.timing`: the heartbeat math as plain functions.
- :mod:`cycles.pricing`: core's estimate, price table, caps rewrite and usage-to-actual
  rules, what the integrations (:mod:`cycles.integrations`) charge.
- :mod:`cycles.journal`: the settlement journal's names, identity partition and records.
- :mod:`cycles.testing`: :class:`~cycles.testing.LocalServer`, an in-process Cycles server.
- :func:`decode_response`: one captured response through the client's own response path.

Processes: the SDK runs one background runtime per process. A child created with
``os.fork()`` after the parent used the SDK cannot use it (calls raise
:class:`~cycles.errors.CyclesRuntimeError` instead of hanging); create clients in the child
before any use in the parent, or use the ``spawn`` start method.
"""

from __future__ import annotations

from . import errors, journal, lifecycle, models, pricing, timing
from ._native import __version__
from .client import AsyncClient, Client
from .decode import decode_response
from .errors import *  # noqa: F403
from .errors import __all__ as _errors_all
from .lifecycle import *  # noqa: F403
from .lifecycle import __all__ as _lifecycle_all
from .models import *  # noqa: F403
from .models import __all__ as _models_all

__all__ = [
    "__version__",
    "Client",
    "AsyncClient",
    "decode_response",
    "errors",
    "journal",
    "lifecycle",
    "models",
    "pricing",
    "timing",
    *_errors_all,
    *_lifecycle_all,
    *_models_all,
]
