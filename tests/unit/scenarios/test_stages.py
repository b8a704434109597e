"""A stage's load kind and label, derived in one place: the REST and progress label, the
report's compact form, and closed vs open (seeded or replayed) shards."""

from __future__ import annotations

from api.control.planner import plan_run
from scenarios.loader import parse_scenario
from scenarios.stages import load_kind, scheduled_rate, stage_label
from scenarios.wire.contract import ShardRate
from tests.support.builders import VALID_SCENARIO


def test_a_stage_is_named_by_its_level() -> None:
    assert stage_label(8) == "concurrency 8"
    assert stage_label(0, 5.0) == "rate 5 rps"
    assert stage_label(8, 2.5) == "rate 2.5 rps, ≤8 in flight"
    assert stage_label(8, index=1) == "stage 1 · concurrency 8"


def test_the_reports_compact_label_leaves_out_a_level_without_streams() -> None:
    assert stage_label(32, index=2, compact=True) == "stage 2 · c=32"
    assert stage_label(0, index=2, compact=True) == "stage 2"
    assert stage_label(4, 10.0, index=0, compact=True) == "stage 0 · 10 rps ≤4"


def test_a_shard_with_a_rate_is_open_and_a_replay_has_no_schedule_of_its_own() -> None:
    closed = plan_run("r", parse_scenario(VALID_SCENARIO))[0].shards[0]
    assert load_kind(closed) == "closed" and scheduled_rate(closed) is None
    seeded = closed.model_copy(update={"rate": ShardRate(rps=5.0)})
    assert load_kind(seeded) == "open" and scheduled_rate(seeded) == seeded.rate
    replay = closed.model_copy(update={"rate": ShardRate(rps=5.0, replay=True)})
    assert load_kind(replay) == "open" and scheduled_rate(replay) is None
