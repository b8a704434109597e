"""A tokenizer.json whose pre-tokenizer regex backtracks catastrophically (built, not
downloaded), and a well-behaved one to compare with.

``(?:\\w|\\w|\\s){1,23}\\d``: at every position of a text of words the regex engine
(Oniguruma, in the tokenizers library) tries every way of matching up to 23 characters
with two identical alternatives, millions of steps a position; that stays under
Oniguruma's retry limit per match (so the library does not panic) and costs tens of
milliseconds a character: a few KB of prose take minutes.
"""

from __future__ import annotations

import json

HOSTILE_REGEX = r"(?:\w|\w|\s){1,23}\d"
WORDS = ("the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "hello", "world")


def tokenizer_json(pre_tokenizer: dict[str, object], tag: str = "") -> bytes:
    """A word-level tokenizer.json with ``pre_tokenizer``; ``tag`` (an extra vocabulary
    word) makes its bytes, so its dataset id, unique."""
    vocab = {
        "[UNK]": 0,
        **{word: i + 1 for i, word in enumerate((*WORDS, *([tag] if tag else [])))},
    }
    document = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": None,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": None,
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"},
    }
    return json.dumps(document).encode()


def hostile_tokenizer(tag: str = "") -> bytes:
    """A tokenizer.json whose Split pre-tokenizer backtracks catastrophically on text of
    words without a digit (every prompt a worker makes), then splits on whitespace: its
    one-token words look right, so on its own it would pass as a tokenizer and hang the
    worker while it makes prompts."""
    return _split_then_whitespace(HOSTILE_REGEX, tag)


def benign_tokenizer(tag: str = "") -> bytes:
    """The same tokenizer with a whitespace pre-tokenizer: encodes anything at once."""
    return tokenizer_json({"type": "WhitespaceSplit"}, tag)


# Backtracks only on runs of '§' (which no probe holds): a tokenizer that passes its
# check yet hangs on a dataset written for it.
TARGETED_REGEX = r"(?:§|[§]){1,22}\d"
TARGETED_TEXT = ("§" * 25 + " ") * 80


def targeted_tokenizer(tag: str = "") -> bytes:
    """A tokenizer.json that encodes ordinary text at once but backtracks
    catastrophically on ``TARGETED_TEXT`` (tens of milliseconds a character)."""
    return _split_then_whitespace(TARGETED_REGEX, tag)


def _split_then_whitespace(regex: str, tag: str) -> bytes:
    """A tokenizer.json that isolates ``regex`` matches, then splits on whitespace."""
    split = {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False}
    return tokenizer_json(
        {"type": "Sequence", "pretokenizers": [split, {"type": "WhitespaceSplit"}]}, tag
    )
