"""Choosing a shard's prompt maker: the workload's tokenizer, server calibration, or
one word a token (docs/lengths.md)."""

from __future__ import annotations

import asyncio

from redis.asyncio import Redis

from scenarios.model import Workload
from workers.exact_prompts import ExactPrompts
from workers.prompt_calibration import CalibratedPrompts, load_fit
from workers.prompts import WORDS, PromptMaker, WordPrompts
from workers.tokenizer import workload_tokenizer

__all__ = ["prompt_maker"]

# Prompt makers of this process per tokenizer (finding its one-token words costs tens
# of milliseconds; tokenizers are cached by workers/tokenizer.py, so ids are stable).
_exact: dict[int, ExactPrompts] = {}


async def prompt_maker(
    redis: Redis, workload: Workload, run_id: str, provider: str, region: str, max_bytes: int
) -> PromptMaker:
    """The shard's prompt maker. Raises TokenizerUnavailable when the workload names a
    tokenizer this worker cannot have."""
    if workload.tokenizer is not None:
        tokenizer = await workload_tokenizer(redis, workload.tokenizer, max_bytes)
        known = _exact.get(id(tokenizer))
        if known is None:
            known = await asyncio.to_thread(ExactPrompts, tokenizer, tuple(WORDS))
            _exact[id(tokenizer)] = known
        return known
    generated = workload.prompts is None and workload.replay is None
    if workload.calibrate and generated:
        return CalibratedPrompts(await load_fit(redis, run_id, provider, region))
    return WordPrompts()
