"""The simulator's prefix cache: blocks of words chained by hash, longest cached run,
LRU eviction; how the endpoint uses it (cached tokens, usage) and what the latency
models do with cached tokens."""

from __future__ import annotations

import orjson
import pytest

from scenarios.providers.simulate import SimulateSpec
from workers.simulator.batching import latency_for
from workers.simulator.latency import FixedLatency
from workers.simulator.prefix_cache import BLOCK_WORDS, PrefixCache, blocks
from workers.simulator.scheduler import BatchScheduler
from workers.simulator.server import SimulatorApp


def _words(n: int, word: str = "w") -> str:
    return " ".join(f"{word}{i}" for i in range(n))


def test_blocks_chain_whole_blocks_and_extend() -> None:
    # A role marker and 31 words: two whole blocks of 16, nothing left over.
    conversation = blocks([("user", _words(31))])
    assert len(conversation.keys) == 2 and conversation.words == 32 and not conversation.tail
    longer = blocks([("assistant", _words(20, "a"))], after=conversation)
    assert longer.keys[:2] == conversation.keys and len(longer.keys) == 3
    assert longer.words == 32 + 21 and len(longer.tail) == 53 - 3 * BLOCK_WORDS
    # The same words after another start are other blocks: keys are chained.
    other = blocks([("system", "x"), ("user", _words(31))])
    assert not set(other.keys) & set(conversation.keys)
    assert blocks([("user", _words(31))], None) == conversation


def test_the_longest_cached_run_and_eviction() -> None:
    cache = PrefixCache(capacity=4 * BLOCK_WORDS)
    first = blocks([("user", _words(47))])  # 3 blocks
    assert cache.cached_share(first) == 0.0
    cache.store(first)
    follow_up = blocks([("user", "next question " + _words(30, "q"))], after=first)
    assert cache.cached_share(follow_up) == pytest.approx(48 / follow_up.words)
    cache.store(follow_up)  # 5 blocks: the least recently used (the first) goes
    assert cache.stats()["blocks"] == 4 and cache.cached_share(first) == 0.0
    assert cache.stats()["hits"] == 1


def test_the_endpoint_prefills_only_what_it_has_not_seen() -> None:
    app = SimulatorApp(SimulateSpec(prefix_cache=True))
    turn1 = [{"role": "user", "content": _words(100)}]
    cold = app.prompt(turn1)
    assert (cold.tokens, cold.cached) == (100, 0)
    app.served(cold, " tok" * 20)
    turn2 = [
        *turn1,
        {"role": "assistant", "content": " tok" * 20},
        {"role": "user", "content": "more"},
    ]
    warm = app.prompt(turn2)
    assert warm.tokens == 121
    # The whole blocks of turn 1 and its answer (122 words with markers: 7 blocks).
    assert warm.cached == round(121 * 7 * BLOCK_WORDS / 124)
    usage = orjson.loads(app.usage(warm, 5))
    assert usage["prompt_tokens_details"] == {"cached_tokens": warm.cached}
    assert orjson.loads(app.stats())["prefix_cache"]["hits"] == 1
    plain = SimulatorApp(SimulateSpec())
    assert plain.prompt(turn2).cached == 0
    assert "prompt_tokens_details" not in orjson.loads(plain.usage(plain.prompt(turn2), 5))


def test_latency_models_skip_cached_tokens() -> None:
    fixed = FixedLatency(0.005, 0.001, prefill_s_per_token=0.001)
    assert fixed.first_token_s(100) == pytest.approx(0.105)
    assert fixed.first_token_s(100, cached_tokens=90) == pytest.approx(0.015)
    spec = SimulateSpec(prefill_ms_per_token=0.5)
    model = latency_for(spec)
    assert isinstance(model, FixedLatency) and model.prefill_s_per_token == 0.0005

    batching = BatchScheduler.from_spec(SimulateSpec(model="llama-3.1-8b"))
    seq = batching.submit(1000, 10, 0.0, cached_tokens=900)
    assert seq.prefilled == 900
    assert batching.submit(1000, 10, 0.0, cached_tokens=5000).prefilled == 999  # one is left


def test_a_reset_empties_the_cache_and_keeps_the_totals() -> None:
    cache = PrefixCache(capacity=10_000)
    conversation = blocks([("user", _words(63))])
    cache.store(conversation)
    assert cache.cached_share(conversation) == 1.0
    cache.reset()
    assert cache.cached_share(conversation) == 0.0
    stats = cache.stats()
    assert stats["blocks"] == 0 and stats["resets"] == 1 and stats["hits"] == 1
