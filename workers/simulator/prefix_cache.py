"""The simulated endpoint's prefix cache (``simulate.prefix_cache``, docs/workloads.md).

Serving stacks keep the KV of prompts (and of the answers they generated) and reuse it
for a later request that starts with the same tokens (vLLM's automatic prefix caching,
SGLang's radix cache): such a request prefills only its uncached suffix, which is what
makes a multi-turn session's later turns fast. This model works message by message
rather than in blocks of tokens: entry ``i`` of a conversation is the hash of its first
``i`` messages (role and text), worth the tokens of message ``i``. A request's cached
tokens are those of its longest run of leading messages the cache holds; after it is
served, its messages and its answer are stored, so the next turn of the conversation
(which sends them back, answer included) finds them. The cache holds at most
``capacity`` tokens and evicts the least recently used entries first; an evicted entry
cuts every longer prefix of its conversation, as a freed KV block does.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence

__all__ = ["PrefixCache", "chain"]

Message = tuple[str, str]  # (role, text)


def chain(messages: Sequence[Message], previous: bytes = b"") -> list[bytes]:
    """Hash of each leading run of ``messages``: entry i covers messages 0..i (after the
    run whose hash is ``previous``)."""
    hashes = []
    for role, text in messages:
        digest = hashlib.blake2b(previous, digest_size=16)
        digest.update(role.encode())
        digest.update(b"\0")
        digest.update(text.encode())
        previous = digest.digest()
        hashes.append(previous)
    return hashes


class PrefixCache:
    """Leading runs of conversations served, bounded in tokens, least recently used out."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.tokens = 0  # held by the entries
        self.hits = 0  # requests that found some of their prompt cached
        self.cached_tokens = 0  # prompt tokens served from the cache, over all requests
        self._entries: OrderedDict[bytes, int] = OrderedDict()

    def lookup(self, hashes: Sequence[bytes], tokens: Sequence[int]) -> int:
        """Tokens of the longest leading run of messages held (``tokens[i]`` is message
        i's); the run's entries become the most recently used."""
        cached = 0
        for digest, count in zip(hashes, tokens, strict=True):
            if digest not in self._entries:
                break
            self._entries.move_to_end(digest)
            cached += count
        if cached:
            self.hits += 1
            self.cached_tokens += cached
        return cached

    def store(self, hashes: Sequence[bytes], tokens: Sequence[int]) -> None:
        """Hold every leading run of a conversation served (``tokens[i]`` is message i's),
        evicting the least recently used entries beyond the capacity."""
        for digest, count in zip(hashes, tokens, strict=True):
            held = self._entries.get(digest)
            if held is None:
                self._entries[digest] = count
                self.tokens += count
            else:
                self._entries.move_to_end(digest)
        while self.tokens > self.capacity and self._entries:
            _, count = self._entries.popitem(last=False)
            self.tokens -= count

    def stats(self) -> dict[str, int]:
        """What the cache holds and has served."""
        return {
            "entries": len(self._entries),
            "tokens": self.tokens,
            "capacity": self.capacity,
            "hits": self.hits,
            "cached_tokens": self.cached_tokens,
        }
