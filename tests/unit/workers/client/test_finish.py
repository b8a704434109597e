"""Finish reasons of every dialect in one vocabulary; server text that is not a plain word
never reaches a record."""

from __future__ import annotations

import pytest

from workers.client.finish import (
    BEDROCK_REASONS,
    LLAMACPP_STOP_TYPES,
    OPENAI_REASONS,
    TGI_REASONS,
    finish_reason,
)


@pytest.mark.parametrize(
    ("raw", "table", "recorded"),
    [
        ("stop", OPENAI_REASONS, "stop"),
        ("length", OPENAI_REASONS, "length"),
        ("function_call", OPENAI_REASONS, "tool_calls"),
        ("eos", LLAMACPP_STOP_TYPES, "stop"),
        ("word", LLAMACPP_STOP_TYPES, "stop"),
        ("limit", LLAMACPP_STOP_TYPES, "length"),
        ("eos_token", TGI_REASONS, "stop"),
        ("stop_sequence", TGI_REASONS, "stop"),
        ("length", TGI_REASONS, "length"),
        ("end_turn", BEDROCK_REASONS, "stop"),
        ("max_tokens", BEDROCK_REASONS, "length"),
        ("tool_use", BEDROCK_REASONS, "tool_calls"),
        ("guardrail_intervened", BEDROCK_REASONS, "content_filter"),
        ("content_filtered", BEDROCK_REASONS, "content_filter"),
    ],
)
def test_each_dialect_maps_to_the_shared_vocabulary(
    raw: str, table: dict[str, str], recorded: str
) -> None:
    assert finish_reason(raw, table) == recorded


def test_no_reason_and_unknown_words() -> None:
    for missing in (None, "", 0, ["stop"], {"type": "stop"}):
        assert finish_reason(missing, OPENAI_REASONS) is None
    assert finish_reason("abort", OPENAI_REASONS) == "abort"  # the server's own word
    assert finish_reason("recitation", BEDROCK_REASONS) == "recitation"
    for hostile in ("x" * 33, "stop\nlength", "<script>", "\x1b[2J", "stop reason"):
        assert finish_reason(hostile, OPENAI_REASONS) == "other"
