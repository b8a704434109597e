"""Deterministic request plans and length distributions."""

from __future__ import annotations

import random
import statistics

import pytest

from scenarios.datasets.files import WorkloadFileError, parse_entries
from scenarios.workload.prefix_cache import PrefixCacheSpec
from scenarios.workload.spec import (
    FixedLength,
    LognormalLength,
    MixClass,
    NormalLength,
    UniformLength,
    Workload,
)
from workers.prompts.plan import (
    RepeatedText,
    plan_request,
    repeated_share,
    request_planner,
    sample_length,
)


def test_plans_are_deterministic_per_seed_stage_and_seq() -> None:
    workload = Workload(
        mix=[
            MixClass(
                prompt_tokens=FixedLength(dist="fixed", value=50),
                output_tokens=UniformLength(dist="uniform", min=1, max=100),
            )
        ]
    )
    a = plan_request(workload, 7, 1, 3)
    assert a == plan_request(workload, 7, 1, 3)
    assert a != plan_request(workload, 7, 1, 4)
    assert len(a.prompt.split()) == 50


def test_lognormal_mean_and_bounds() -> None:
    rng = random.Random(1)
    dist = LognormalLength(dist="lognormal", mean=2000, sigma=0.5, min=64, max=100_000)
    draws = [sample_length(dist, rng) for _ in range(20_000)]
    assert abs(statistics.fmean(draws) - 2000) / 2000 < 0.03
    clipped = LognormalLength(dist="lognormal", mean=2000, sigma=0.5, min=1500, max=2500)
    assert all(1500 <= sample_length(clipped, rng) <= 2500 for _ in range(1000))


def test_normal_is_clipped_to_at_least_min() -> None:
    rng = random.Random(2)
    dist = NormalLength(dist="normal", mean=5, std=20, min=1, max=30)
    assert all(1 <= sample_length(dist, rng) <= 30 for _ in range(1000))


def test_mix_weights_are_respected() -> None:
    small = MixClass(
        weight=3,
        prompt_tokens=FixedLength(dist="fixed", value=1),
        output_tokens=FixedLength(dist="fixed", value=1),
    )
    large = MixClass(
        weight=1,
        prompt_tokens=FixedLength(dist="fixed", value=9),
        output_tokens=FixedLength(dist="fixed", value=1),
    )
    workload = Workload(mix=[small, large])
    share = sum(plan_request(workload, 0, 0, i).prompt_tokens == 1 for i in range(4000)) / 4000
    assert 0.72 < share < 0.78


def _fixed_workload(**extra: object) -> Workload:
    mix = [
        MixClass(
            prompt_tokens=FixedLength(dist="fixed", value=40),
            output_tokens=FixedLength(dist="fixed", value=7),
        )
    ]
    return Workload.model_validate({"mix": mix, **extra})


def test_shared_prefix_is_common_to_every_prompt_and_counted() -> None:
    workload = _fixed_workload(shared_prefix_tokens=32)
    a, b = (plan_request(workload, 5, 0, seq) for seq in (0, 1))
    assert a.prompt.split()[:32] == b.prompt.split()[:32]
    assert a.prompt.split()[32:] != b.prompt.split()[32:]
    assert a.prompt_tokens == len(a.prompt.split()) == 40
    # the prefix is the run's: the same in every stage
    assert plan_request(workload, 5, 3, 0).prompt.split()[:32] == a.prompt.split()[:32]


DATASET = "ds-" + "ab" * 32


def test_prompt_file_lines_are_used_in_order() -> None:
    data = (
        b'{"prompt": "What is the capital of France?"}\n'
        b"# a comment\n"
        b'{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}], "max_tokens": 3}\n'
    )
    workload = _fixed_workload(prompts={"dataset": DATASET})
    entries = parse_entries(data, "prompts.jsonl", replay=False)
    first, second, third = (plan_request(workload, 0, 0, seq, entries) for seq in range(3))
    assert first.prompt == "What is the capital of France?"
    assert first.messages == (("user", "What is the capital of France?"),)
    assert first.output_tokens == 7  # from the mix
    assert second.messages == (("system", "Be brief."), ("user", "Hi"))
    assert second.output_tokens == 3  # from the line
    assert third.prompt == first.prompt  # cycles
    assert first.prompt_tokens == round(len(first.prompt) / 4)


def test_replay_entries_become_requests_in_timestamp_order() -> None:
    data = (
        b'{"timestamp": 10.5, "prompt": "second", "max_tokens": 5}\n'
        b'{"timestamp": "1970-01-01T00:00:10+00:00", "prompt": "first", "max_tokens": 9}\n'
    )
    workload = Workload.model_validate({"replay": {"dataset": DATASET}})
    entries = parse_entries(data, "traffic.jsonl", replay=True)
    first, second = (plan_request(workload, 0, 0, seq, entries) for seq in range(2))
    assert (first.prompt, first.output_tokens) == ("first", 9)
    assert (second.prompt, second.output_tokens) == ("second", 5)


def test_bad_workload_files_name_source_and_line() -> None:
    data = b'{"timestamp": 1, "prompt": "ok", "max_tokens": 5}\n{"timestamp": 2, "prompt": "x"}\n'
    with pytest.raises(WorkloadFileError, match=r"bad.jsonl:2: .*max_tokens"):
        parse_entries(data, "bad.jsonl", replay=True)


def test_a_workload_with_a_dataset_needs_its_entries() -> None:
    # Workers never read a path: without the dataset's entries there is no plan.
    workload = Workload.model_validate({"replay": {"dataset": DATASET}})
    with pytest.raises(WorkloadFileError, match="not loaded"):
        plan_request(workload, 0, 0, 0)


def _cache_workload(target: float, prompt: int = 200, low: int | None = None) -> Workload:
    tokens = (
        FixedLength(dist="fixed", value=prompt)
        if low is None
        else UniformLength(dist="uniform", min=low, max=prompt)
    )
    return Workload(
        mix=[MixClass(prompt_tokens=tokens, output_tokens=FixedLength(dist="fixed", value=8))],
        prefix_cache=PrefixCacheSpec(target_hit_rate=target),
    )


@pytest.mark.parametrize("target", [0.0, 0.5, 0.9])
def test_a_target_hit_rate_repeats_that_share_of_each_prompt(target: float) -> None:
    plan = request_planner(_cache_workload(target, low=50), 7, 2)
    requests = [plan(seq) for seq in range(40)]
    longest = max(requests, key=lambda r: r.prompt_tokens).prompt.split()
    for request in requests:
        share = repeated_share(request.prompt_tokens, target)
        words = request.prompt.split()
        assert len(words) == request.prompt_tokens  # one word a token, as planned
        # Its first `share` words are the stage's text: a prefix of every longer cut.
        assert words[:share] == longest[:share]
        assert request.cached_prefix_tokens == (0 if request.seq == 0 else share)
        assert share == min(round(target * request.prompt_tokens), request.prompt_tokens - 1)
    planned = sum(r.cached_prefix_tokens or 0 for r in requests[1:])
    assert planned / sum(r.prompt_tokens for r in requests[1:]) == pytest.approx(target, abs=0.01)
    if target:
        # Prompts stay distinct: each keeps words of its own after the repeated text.
        assert len({r.prompt for r in requests}) == len(requests)


def test_each_stage_has_its_own_repeated_text_and_no_target_plans_nothing() -> None:
    first, second = (request_planner(_cache_workload(0.5), 7, stage)(1) for stage in (0, 1))
    assert first.prompt.split()[:100] != second.prompt.split()[:100]
    assert (
        plan_request(Workload(mix=_cache_workload(0.5).mix), 7, 0, 1).cached_prefix_tokens is None
    )


def test_a_target_refuses_text_it_cannot_shape() -> None:
    mix = _cache_workload(0.5).mix
    with pytest.raises(ValueError, match="shared_prefix_tokens"):
        Workload(
            mix=mix, shared_prefix_tokens=10, prefix_cache=PrefixCacheSpec(target_hit_rate=0.5)
        )
    with pytest.raises(ValueError, match="target_hit_rate"):
        PrefixCacheSpec(target_hit_rate=1.0)


def test_repeated_text_extends_without_changing_what_was_made() -> None:
    text = RepeatedText(("a", "b", "c", "d"), "7/0/prefix-cache")
    short = text.text(5)
    assert text.text(50).startswith(short + " ")
    assert RepeatedText(("a", "b", "c", "d"), "7/0/prefix-cache").text(50) == text.text(50)
