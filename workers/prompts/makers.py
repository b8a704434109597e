"""Choosing a shard's prompt maker: the workload's tokenizer, server calibration, or
one word a token (docs/lengths.md)."""

from __future__ import annotations

import asyncio
from collections import OrderedDict

from redis.asyncio import Redis

from scenarios.workload.spec import Workload
from workers.prompts.calibration import CalibratedPrompts, load_fit
from workers.prompts.exact import ExactPrompts
from workers.prompts.plan import WORDS, PromptMaker, WordPrompts
from workers.prompts.tokenizer import workload_tokenizer

__all__ = ["prompt_maker"]

# Exact prompt makers of this process, the most recently used few, by tokenizer (loading
# a tokenizer and finding its one-token words costs tens of milliseconds; a dataset id is
# a content hash, a hub name with its revision names the same file while it is cached).
_EXACT_KEPT = 4
_exact: OrderedDict[str, ExactPrompts] = OrderedDict()


async def prompt_maker(
    redis: Redis, workload: Workload, run_id: str, provider: str, region: str, max_bytes: int
) -> PromptMaker:
    """The shard's prompt maker. Raises TokenizerUnavailable when the workload names a
    tokenizer this worker cannot have."""
    if workload.tokenizer is not None:
        key = workload.tokenizer.describe()
        known = _exact.get(key)
        if known is None:
            tokenizer = await workload_tokenizer(redis, workload.tokenizer, max_bytes)
            known = await asyncio.to_thread(ExactPrompts, tokenizer, tuple(WORDS), key)
            _exact[key] = known
            while len(_exact) > _EXACT_KEPT:
                _exact.popitem(last=False)
        _exact.move_to_end(key)
        return known
    generated = workload.prompts is None and workload.replay is None and workload.dataset is None
    if workload.calibrate and generated:
        return CalibratedPrompts(await load_fit(redis, run_id, provider, region))
    return WordPrompts()
