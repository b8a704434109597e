"""Latency models of the simulated endpoint: when each output token becomes available.

A model turns one request (prompt length, max tokens) into an async iterator that yields
the number of tokens in each SSE event at the moment they are due. The server only
writes what the model yields, so a roofline-driven continuous-batching model can replace
the fixed one without touching the HTTP side.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Protocol


class LatencyModel(Protocol):
    """Decides when tokens of a request are emitted."""

    def emissions(
        self, prompt_tokens: int, max_tokens: int, cached_tokens: int = 0
    ) -> AsyncIterator[int]:
        """Yield the token count of each event, each at the time it is due;
        ``cached_tokens`` of the prompt are in the prefix cache (not prefilled)."""
        ...


async def sleep_until(deadline: float) -> None:
    """Sleep until ``time.perf_counter()`` reaches ``deadline``; never wakes early.

    Event-loop timers may round to whole milliseconds and fire slightly early (uvloop),
    so the remaining time is re-checked after each wake-up.
    """
    while (remaining := deadline - time.perf_counter()) > 0:
        await asyncio.sleep(remaining)


class FixedLatency:
    """First token after ``ttft_s`` plus ``prefill_s_per_token`` for each prompt token not
    in the prefix cache, then one token every ``itl_s``, paced against absolute deadlines
    so timer jitter never accumulates; ``tokens_per_chunk`` tokens per event."""

    def __init__(
        self,
        ttft_s: float,
        itl_s: float,
        tokens_per_chunk: int = 1,
        prefill_s_per_token: float = 0.0,
    ) -> None:
        self.ttft_s = ttft_s
        self.itl_s = itl_s
        self.tokens_per_chunk = tokens_per_chunk
        self.prefill_s_per_token = prefill_s_per_token

    def first_token_s(self, prompt_tokens: int, cached_tokens: int = 0) -> float:
        """Seconds from arrival to the first token."""
        return self.ttft_s + max(0, prompt_tokens - cached_tokens) * self.prefill_s_per_token

    async def emissions(
        self, prompt_tokens: int, max_tokens: int, cached_tokens: int = 0
    ) -> AsyncIterator[int]:
        """Yield chunk sizes at ``start + first token + (n - 1) * itl`` for the n-th."""
        start = time.perf_counter()
        first = self.first_token_s(prompt_tokens, cached_tokens)
        produced = 0
        while produced < max_tokens:
            count = min(self.tokens_per_chunk, max_tokens - produced)
            produced += count
            await sleep_until(start + first + (produced - 1) * self.itl_s)
            yield count
