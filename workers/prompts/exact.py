"""Prompts of exactly N tokens for a given tokenizer (docs/lengths.md).

Prompts are words of the tokenizer's own vocabulary that are one token each, both at the
start of a text and after a space, joined by spaces. A text of n such words is usually n
tokens; the text is encoded to check, and words are added or removed until the count is
exactly the planned one. Counts are of the text alone (``add_special_tokens=False``): the
chat template (BOS, role headers) a server adds is not part of the planned length.
Deterministic for a given tokenizer and random generator.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from typing import TYPE_CHECKING

from scenarios.tokenizers.files import TokenizerUnavailable
from scenarios.tokenizers.probe import count_in_child
from workers.prompts.plan import PromptText, RepeatedText

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = ["ExactPrompts"]

# Adjust rounds before the last word is swapped piece by piece (one or two suffice when
# every word is one token).
_ROUNDS = 24
# Vocabulary entries examined for one-token words, and the words kept.
_CANDIDATES = 20_000
_KEEP = 4_000


class ExactPrompts:
    """Makes and counts prompts with one tokenizer."""

    def __init__(
        self, tokenizer: Tokenizer, seed_words: tuple[str, ...] = (), name: str = "tokenizer"
    ) -> None:
        """``name``: how errors name the tokenizer (``TokenizerRef.describe()``)."""
        self.tokenizer = tokenizer
        self.name = name
        self.pieces = _one_token_words(tokenizer, seed_words)
        if not self.pieces:
            raise TokenizerUnavailable(
                "the tokenizer has no word that is one token: prompts cannot be made from it"
            )
        self._prefixes: dict[tuple[int, int], str] = {}
        self._prefix_tokens: dict[str, int] = {}  # so a long prefix is encoded once

    @property
    def vocabulary(self) -> tuple[str, ...]:
        """The one-token words prompts are made of."""
        return self.pieces

    def repeated(self, tokens: int, text: RepeatedText) -> str:
        """The start of the repeated ``text`` that is exactly ``tokens`` tokens (its
        words are one token each, so the first guess is nearly always right)."""
        words = max(tokens, 1)
        for _ in range(_ROUNDS):
            cut = text.text(words)
            found = self.count(cut)
            if found == tokens:
                return cut
            words = max(words + tokens - found, 1)
        raise TokenizerUnavailable(
            f"could not cut a repeated prefix of exactly {tokens} tokens with this tokenizer"
        )

    def count(self, text: str) -> int:
        """Tokens of ``text`` alone (no special tokens, no chat template)."""
        with encoding_errors():
            return len(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def count_many(self, texts: list[str]) -> list[int]:
        """Tokens of each text, as :meth:`count` (a dataset's rows: the submitter's own
        text, counted in a child process under a time limit, ``count_in_child``, so that a
        regex that backtracks on exactly that text fails the shard instead of hanging
        it). Blocking: call it off the event loop."""
        if not texts:
            return []
        return count_in_child(self.tokenizer.to_str(), texts, self.name)

    def prompt(self, tokens: int, rng: random.Random, prefix: str = "") -> PromptText:
        """A prompt of exactly ``tokens`` tokens, counted by the tokenizer."""
        return PromptText(self.make(tokens, rng, prefix), max(tokens, 1), "tokenizer")

    def prefix(self, tokens: int, seed: int) -> str:
        """The run's shared prefix: exactly ``tokens`` tokens, made once."""
        key = (tokens, seed)
        if key not in self._prefixes:
            text = self.make(tokens, random.Random(f"{seed}/shared-prefix"))
            self._prefixes[key] = text
            self._prefix_tokens[text] = max(tokens, 1)
        return self._prefixes[key]

    def make(self, tokens: int, rng: random.Random, prefix: str = "") -> str:
        """A text of exactly ``tokens`` tokens (at least 1) that starts with ``prefix``
        (whose tokens count; at least one word follows it)."""
        tokens = max(tokens, 1)
        head = f"{prefix} " if prefix else ""
        base = (self._prefix_tokens.get(prefix) or self.count(prefix)) if prefix else 0
        words = rng.choices(self.pieces, k=max(tokens - base, 1))
        for _ in range(_ROUNDS):
            found = self.count(head + " ".join(words))
            if found == tokens:
                return head + " ".join(words)
            if found < tokens:
                words += rng.choices(self.pieces, k=tokens - found)
            elif len(words) > 1:
                del words[-min(found - tokens, len(words) - 1) :]
            else:
                break
        # Not converging (words merging across spaces): swap the last word until exact.
        for piece in self.pieces:
            text = head + " ".join([*words[:-1], piece])
            if self.count(text) == tokens:
                return text
        raise TokenizerUnavailable(
            f"could not make a prompt of exactly {tokens} tokens with this tokenizer"
        )


def _one_token_words(tokenizer: Tokenizer, seed_words: tuple[str, ...]) -> tuple[str, ...]:
    """Words that are one token alone and one more token after another word: common
    English words first (``seed_words``), then alphabetic entries of the vocabulary."""
    vocab = sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])[:_CANDIDATES]
    decoded = [tokenizer.decode([token_id]).strip() for _, token_id in vocab]
    candidates = list(dict.fromkeys([*seed_words, *decoded]))
    candidates = [w for w in candidates if w.isascii() and w.isalpha() and 1 < len(w) <= 16]
    if not candidates:
        candidates = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    with encoding_errors():
        alone = tokenizer.encode_batch(candidates, add_special_tokens=False)
        pairs = tokenizer.encode_batch([f"{w} {w}" for w in candidates], add_special_tokens=False)
    unknown = getattr(tokenizer.model, "unk_token", None)  # never a word of the prompt
    kept = [
        word
        for word, one, two in zip(candidates, alone, pairs, strict=True)
        if len(one.ids) == 1 and len(two.ids) == 2 and unknown not in one.tokens
    ]
    return tuple(kept[:_KEEP])


@contextlib.contextmanager
def encoding_errors() -> Iterator[None]:
    """Turn the tokenizer library's failures into TokenizerUnavailable: its Rust side
    raises plain exceptions, and a panic (e.g. a regex over Oniguruma's retry limit)
    arrives as ``PanicException``, a BaseException that would escape ``except Exception``."""
    try:
        yield
    except TokenizerUnavailable:
        raise
    except Exception as exc:
        raise TokenizerUnavailable(f"the tokenizer failed to encode a text ({exc})") from None
    except BaseException as exc:
        if type(exc).__name__ != "PanicException":
            raise
        reason = str(exc).splitlines()[0][:300] if str(exc) else "a panic"
        raise TokenizerUnavailable(f"the tokenizer failed to encode a text ({reason})") from None
