"""Why an answer ended, in one vocabulary for every dialect (docs/providers.md, "Finish
reasons").

Each dialect names its reasons its own way (OpenAI ``finish_reason``, llama.cpp
``stop_type``, TGI ``details.finish_reason``, Bedrock ``stopReason``, Anthropic
``stop_reason``, the Responses API's status and ``incomplete_details.reason``, Gemini
``finishReason``); records keep them
mapped to OpenAI's words so that providers compare: ``stop`` (the model ended: its
end-of-sequence token or a stop sequence), ``length`` (the token limit), ``tool_calls``,
``content_filter``. A value outside a dialect's table is kept as the server wrote it when
it is a short plain word, else as ``other``: it is server text bound for the database.
"""

from __future__ import annotations

import re

__all__ = [
    "ANTHROPIC_REASONS",
    "BEDROCK_REASONS",
    "GEMINI_REASONS",
    "LLAMACPP_STOP_TYPES",
    "OPENAI_REASONS",
    "RESPONSES_INCOMPLETE_REASONS",
    "TGI_REASONS",
    "finish_reason",
]

# The shared vocabulary (OpenAI's values pass through unchanged).
OPENAI_REASONS = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",  # the deprecated single-function form
    "content_filter": "content_filter",
}
# llama-server's final ``stop_type`` ("none" means it stopped for none of these: the
# answer has no finish reason).
LLAMACPP_STOP_TYPES = {"eos": "stop", "word": "stop", "limit": "length"}
TGI_REASONS = {"eos_token": "stop", "stop_sequence": "stop", "length": "length"}
BEDROCK_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "guardrail_intervened": "content_filter",
    "content_filtered": "content_filter",
}
# Anthropic Messages ``stop_reason`` (pause_turn: a server-tool loop paused the turn,
# which ended it as far as this answer goes; refusal: the model declined).
ANTHROPIC_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}
# OpenAI Responses ``incomplete_details.reason`` of a ``response.incomplete`` answer (a
# completed response is ``stop``, or ``tool_calls`` when it made a function call).
RESPONSES_INCOMPLETE_REASONS = {
    "max_output_tokens": "length",
    "content_filter": "content_filter",
}
# Gemini ``finishReason`` (a STOP whose answer called a function is ``tool_calls``).
GEMINI_REASONS = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
}

_PLAIN = re.compile(r"[A-Za-z0-9_.:-]{1,32}")


def finish_reason(raw: object, table: dict[str, str]) -> str | None:
    """``raw`` in the shared vocabulary; None when the server gave no reason (absent,
    null, empty or not a string)."""
    if not isinstance(raw, str) or not raw:
        return None
    known = table.get(raw)
    if known is not None:
        return known
    return raw if _PLAIN.fullmatch(raw) else "other"
