"""The simulated endpoint's prefix cache (``simulate.prefix_cache``, docs/workloads.md).

Serving stacks keep the KV of prompts (and of the answers they generated) and reuse it
for a later request that starts with the same tokens (vLLM's automatic prefix caching,
SGLang's radix cache): such a request prefills only its uncached suffix, which is what
makes a multi-turn session's later turns and prompts with a shared prefix fast.

This model does what vLLM does, in words instead of tokens: a conversation is the
sequence of its messages' words, each message opened by a marker of its role; it is cut
into blocks of :data:`BLOCK_WORDS` words, and block ``i``'s key is a hash of blocks
``0..i`` (a chain), so a block matches only after the same whole prefix. A request's
cached share is its longest run of leading blocks the cache holds (only whole blocks
are cached); its cached tokens are that share of its prompt tokens. After a request is
served its conversation and its answer are stored, so the next turn of the conversation
(which sends them back, answer included) finds them. The cache holds at most
``capacity`` words and evicts the least recently used blocks first; an evicted block
cuts every longer prefix that runs through it, as a freed KV block does.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["BLOCK_WORDS", "Blocks", "PrefixCache", "blocks"]

BLOCK_WORDS = 16  # vLLM's default block size is 16 tokens

Message = tuple[str, str]  # (role, text)


@dataclass(frozen=True, slots=True)
class Blocks:
    """A conversation cut into blocks: the chained key of each whole block, its words,
    and the words of its unfinished last block (with its running hash) to extend."""

    keys: tuple[bytes, ...]
    words: int
    tail: tuple[str, ...]
    previous: bytes


def blocks(messages: Sequence[Message], after: Blocks | None = None) -> Blocks:
    """The blocks of ``messages`` (following the conversation ``after``, if given)."""
    keys = list(after.keys) if after is not None else []
    pending = list(after.tail) if after is not None else []
    previous = after.previous if after is not None else b""
    words = after.words if after is not None else 0
    for role, text in messages:
        for word in (f"<{role}>", *text.split()):
            pending.append(word)
            words += 1
            if len(pending) == BLOCK_WORDS:
                digest = hashlib.blake2b(previous, digest_size=16)
                digest.update("\0".join(pending).encode())
                previous = digest.digest()
                keys.append(previous)
                pending = []
    return Blocks(tuple(keys), words, tuple(pending), previous)


class PrefixCache:
    """Blocks of the conversations served, bounded in words, least recently used out."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.hits = 0  # requests that found part of their prompt cached
        self.resets = 0  # times the cache was emptied (POST /reset_prefix_cache)
        self.cached_words = 0  # prompt words served from the cache, over all requests
        self._blocks: OrderedDict[bytes, None] = OrderedDict()

    def cached_share(self, prompt: Blocks) -> float:
        """The share of ``prompt``'s words in its longest run of cached leading blocks;
        those blocks become the most recently used."""
        matched = 0
        for key in prompt.keys:
            if key not in self._blocks:
                break
            self._blocks.move_to_end(key)
            matched += 1
        if not matched or not prompt.words:
            return 0.0
        self.hits += 1
        self.cached_words += matched * BLOCK_WORDS
        return matched * BLOCK_WORDS / prompt.words

    def store(self, conversation: Blocks) -> None:
        """Hold every whole block of a conversation served, evicting the least recently
        used blocks beyond the capacity."""
        for key in conversation.keys:
            if key in self._blocks:
                self._blocks.move_to_end(key)
            else:
                self._blocks[key] = None
        while len(self._blocks) * BLOCK_WORDS > self.capacity:
            self._blocks.popitem(last=False)

    def reset(self) -> None:
        """Forget every block, as vLLM's ``POST /reset_prefix_cache`` does (the counters
        of what was served stay: they are totals)."""
        self._blocks.clear()
        self.resets += 1

    def stats(self) -> dict[str, int]:
        """What the cache holds and has served."""
        return {
            "blocks": len(self._blocks),
            "block_words": BLOCK_WORDS,
            "capacity_words": self.capacity,
            "hits": self.hits,
            "cached_words": self.cached_words,
            "resets": self.resets,
        }
