"""What the control plane knows of a shard and a run: progress samples kept in bounded
memory, and an error raised while the loop worked on a run naming that run."""

from __future__ import annotations

import pytest

from api.control.coordinator import MAX_SAMPLES, ShardProgress, about_run, run_of
from api.control.planner import plan_run
from scenarios.loader import parse_scenario
from tests.support.builders import VALID_SCENARIO


def test_an_error_raised_about_a_run_names_the_innermost_run() -> None:
    with pytest.raises(KeyError) as caught, about_run("outer"), about_run("inner"):
        raise KeyError("shard")
    assert run_of(caught.value) == "inner"
    assert run_of(RuntimeError("elsewhere")) is None


def test_a_long_stage_keeps_its_whole_span_at_a_coarser_grain() -> None:
    (spec, *_) = plan_run("r", parse_scenario(VALID_SCENARIO))[0].shards
    shard = ShardProgress(spec)
    shard.add_sample(0.0, 1, 0)  # its stage clock has not started: not kept
    for second in range(1, 2 * MAX_SAMPLES + 1):
        shard.add_sample(float(second), second, second)
    assert len(shard.samples) <= MAX_SAMPLES
    assert shard.samples[0][0] == 1.0 and shard.elapsed_s is not None
