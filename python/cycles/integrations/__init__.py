"""Guard the model clients you already call, in one line (docs/integrations.md, "Python").

- :mod:`cycles.integrations.openai`: ``guard(openai.OpenAI(...) / AsyncOpenAI(...),
  cycles=client)``, ``chat.completions.create`` and ``responses.create``, streamed or not
  (extra ``cycles-sdk[openai]``).
- :mod:`cycles.integrations.anthropic`: ``guard(anthropic.Anthropic(...) /
  AsyncAnthropic(...), cycles=client)``, ``messages.create`` and ``messages.stream``
  (extra ``cycles-sdk[anthropic]``).
- :mod:`cycles.integrations.langchain`: ``guard(chat_model, cycles=client)``, any LangChain
  chat model (extra ``cycles-sdk[langchain]``, CPython 3.11+).
- :mod:`cycles.integrations.openai_agents`: ``guard(model or model_provider, cycles=client)``,
  every model call of an OpenAI Agents SDK run (extra ``cycles-sdk[agents]``).

Every guarded call reserves before the provider is called, rewrites the request under
``ALLOW_WITH_CAPS``, and commits the provider's reported usage (or releases), all by core's
rules (:mod:`cycles.pricing`), so every language charges the same amount for the same call.
Per-call overrides: ``cycles=CallOptions(...)`` or ``**per_call(...)``.
"""

from __future__ import annotations

from ._guard import OPTION, CallNotSentError, CallOptions, CyclesClient, per_call

__all__ = ["OPTION", "CallNotSentError", "CallOptions", "CyclesClient", "per_call"]
