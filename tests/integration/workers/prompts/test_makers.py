"""A shard's prompt maker, chosen from its workload, with its inputs in a real Redis: the
tokenizer dataset the control plane published, the calibration earlier stages left."""

from __future__ import annotations

import asyncio
import random
import uuid
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from analytics.datasets.uploads import content_id
from api.local.redis_server import RedisServer
from scenarios.tokenizers.files import TokenizerUnavailable
from scenarios.wire.contract import dataset_key
from scenarios.workload.spec import Workload
from tests.support.tiny_tokenizer import train_bpe
from workers.prompts.calibration import MIN_SAMPLES, CalibratedPrompts, LengthFit, save_fit
from workers.prompts.exact import ExactPrompts
from workers.prompts.makers import prompt_maker
from workers.prompts.plan import PromptMaker, WordPrompts

pytestmark = pytest.mark.integration

MIX = [
    {"prompt_tokens": {"dist": "fixed", "value": 8}, "output_tokens": {"dist": "fixed", "value": 2}}
]


def _maker(redis_url: str, workload: dict[str, Any], run_id: str, setup: Any = None) -> PromptMaker:
    async def go() -> PromptMaker:
        redis = Redis.from_url(redis_url)
        try:
            if setup is not None:
                await setup(redis)
            return await prompt_maker(
                redis, Workload.model_validate(workload), run_id, "sim", "local", 1 << 26
            )
        finally:
            await redis.aclose()

    return asyncio.run(go())


def test_a_tokenizer_dataset_gives_exact_prompts(redis_server: RedisServer, tmp_path: Path) -> None:
    content = train_bpe(tmp_path / "tokenizer.json").read_bytes()
    dataset = content_id(content)

    async def publish(redis: Redis) -> None:
        await redis.set(dataset_key(dataset), content, ex=60)

    workload = {"mix": MIX, "tokenizer": {"dataset": dataset}}
    maker = _maker(redis_server.url, workload, "r1", publish)
    assert isinstance(maker, ExactPrompts)
    assert maker.count(maker.prompt(321, random.Random(1)).text) == 321


def test_a_missing_dataset_or_a_path_is_refused_with_the_reason(redis_server: RedisServer) -> None:
    gone = {"mix": MIX, "tokenizer": {"dataset": "ds-" + "1" * 64}}
    with pytest.raises(TokenizerUnavailable, match="not in Redis"):
        _maker(redis_server.url, gone, "r2")
    path = {"mix": MIX, "tokenizer": {"path": "/etc/passwd"}}
    with pytest.raises(TokenizerUnavailable, match="never a path"):
        _maker(redis_server.url, path, "r2")


def test_calibration_starts_from_what_earlier_stages_left(redis_server: RedisServer) -> None:
    run_id = f"cal-{uuid.uuid4().hex[:8]}"
    fresh = _maker(redis_server.url, {"mix": MIX}, run_id)
    assert isinstance(fresh, CalibratedPrompts) and fresh.fit.n == 0
    fit = LengthFit()
    for _ in range(MIN_SAMPLES):
        fit.add(100, 130)

    async def keep(redis: Redis) -> None:
        await save_fit(redis, run_id, "sim", "local", fit)

    carried = _maker(redis_server.url, {"mix": MIX}, run_id, keep)
    assert isinstance(carried, CalibratedPrompts) and carried.fit == fit
    assert carried.words_for(1300) == 1000


def test_one_word_a_token_when_calibration_is_off(redis_server: RedisServer) -> None:
    assert isinstance(_maker(redis_server.url, {"mix": MIX, "calibrate": False}, "r3"), WordPrompts)
