"""The hosted APIs' dialects the simulator speaks besides chat completions, one module
each (``anthropic``, ``openai_responses``, ``gemini``), served by ``serve.py`` with the
chat endpoint's model of latency, prefix cache and faults; :func:`dialect_of` finds a
request's dialect by its method and path."""

from __future__ import annotations

from workers.simulator.dialects import anthropic, gemini, openai_responses
from workers.simulator.dialects.serve import Dialect, Wire, serve

__all__ = ["Dialect", "Wire", "dialect_of", "serve"]

_GEMINI_PREFIX = "/v1beta/models/"
_GEMINI_SUFFIX = ":streamGenerateContent"


def dialect_of(method: str, path: str) -> Dialect | None:
    """The dialect of ``POST /v1/messages``, ``POST /v1/responses`` and ``POST
    /v1beta/models/{model}:streamGenerateContent``; None for any other request."""
    if method != "POST":
        return None
    if path == "/v1/messages":
        return anthropic.DIALECT
    if path == "/v1/responses":
        return openai_responses.DIALECT
    if path.startswith(_GEMINI_PREFIX) and path.endswith(_GEMINI_SUFFIX):
        model = path[len(_GEMINI_PREFIX) : -len(_GEMINI_SUFFIX)]
        return gemini.DIALECT if model and "/" not in model else None
    return None
