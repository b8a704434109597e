"""Session plans: deterministic by seed, turns sized from the mix, the shared prefix only
at the start, the distributions' draws, and a replayed log grouped into sessions."""

from __future__ import annotations

import random

import numpy as np
import pytest

from scenarios.datasets.files import FileEntry
from scenarios.limits import MAX_SESSION_TURNS
from scenarios.workload.sessions import (
    ExponentialSeconds,
    FixedSeconds,
    GeometricTurns,
    LognormalSeconds,
    UniformSeconds,
    UniformTurns,
)
from scenarios.workload.spec import Workload
from workers.load.session_plans import (
    has_replayed_sessions,
    replayed_sessions,
    sample_seconds,
    sample_turns,
    session_planner,
    turn_seq,
)
from workers.prompts.plan import WordPrompts, request_planner

WORKLOAD = Workload.model_validate(
    {
        "mix": [
            {
                "prompt_tokens": {"dist": "uniform", "min": 10, "max": 40},
                "output_tokens": {"dist": "uniform", "min": 5, "max": 9},
            }
        ],
        "shared_prefix_tokens": 20,
        "sessions": {"turns": {"dist": "uniform", "min": 2, "max": 6}, "think_time": 1.5},
    }
)


def test_a_session_is_the_same_on_every_worker_and_differs_from_the_next() -> None:
    plan, again = session_planner(WORKLOAD, 7, 1), session_planner(WORKLOAD, 7, 1)
    for session in range(20):
        a, b = plan(session), again(session)
        assert (a.session_id, a.turns, a.gaps_ns) == (b.session_id, b.turns, b.gaps_ns)
        assert [a.plan_turn(t) for t in range(a.turns)] == [b.plan_turn(t) for t in range(b.turns)]
        assert 2 <= a.turns <= 6 and a.gaps_ns == (1_500_000_000,) * (a.turns - 1)
    assert {plan(s).turns for s in range(20)} != {plan(0).turns}
    assert plan(0).plan_turn(0).prompt != session_planner(WORKLOAD, 8, 1)(0).plan_turn(0).prompt


def test_turns_are_requests_of_the_plan_and_only_the_first_has_the_prefix() -> None:
    session = session_planner(WORKLOAD, 3, 0)(4)
    requests = request_planner(WORKLOAD, 3, 0)
    prefix = WordPrompts().prefix(20, 3)
    first, second = session.plan_turn(0), session.plan_turn(1)
    assert first == requests(turn_seq(4, 0)) and first.seq == 4 * MAX_SESSION_TURNS
    assert first.prompt.startswith(prefix)
    assert not second.prompt.startswith(prefix) and second.seq == turn_seq(4, 1)
    assert 10 <= second.prompt_tokens <= 40  # from the mix, without the prefix


def test_turn_and_think_time_draws() -> None:
    rng = random.Random(1)
    geometric = [
        sample_turns(GeometricTurns(dist="geometric", mean=4, max=50), rng) for _ in range(20_000)
    ]
    assert np.mean(geometric) == pytest.approx(4, rel=0.05) and min(geometric) == 1
    assert max(geometric) <= 50
    assert sample_turns(GeometricTurns(dist="geometric", mean=1, max=5), rng) == 1
    assert {sample_turns(UniformTurns(dist="uniform", min=2, max=3), rng) for _ in range(50)} == {
        2,
        3,
    }
    exponential = [
        sample_seconds(ExponentialSeconds(dist="exponential", mean=2), rng) for _ in range(20_000)
    ]
    assert np.mean(exponential) == pytest.approx(2, rel=0.05)
    clipped = [
        sample_seconds(ExponentialSeconds(dist="exponential", mean=2, max=1), rng)
        for _ in range(100)
    ]
    assert max(clipped) <= 1
    lognormal = [
        sample_seconds(LognormalSeconds(dist="lognormal", mean=3, sigma=0.5), rng)
        for _ in range(20_000)
    ]
    assert np.mean(lognormal) == pytest.approx(3, rel=0.05)
    uniform = sample_seconds(UniformSeconds(dist="uniform", min=1, max=2), rng)
    assert 1 <= uniform <= 2 and sample_seconds(FixedSeconds(dist="fixed", value=0.5), rng) == 0.5


def _entry(t: float, text: str, session: str | None = None, turn: int | None = None) -> FileEntry:
    return FileEntry((("user", text),), 4, t, session, turn)


def test_a_replayed_log_groups_its_lines_into_sessions_in_turn_order() -> None:
    entries = (  # in timestamp order, as parse_entries gives them
        _entry(10.0, "b1", "b", 1),
        _entry(10.5, "alone"),
        _entry(11.0, "a0", "a", 0),
        _entry(11.2, "b0", "b", 0),  # turn 0 captured after turn 1: the turn decides
        _entry(12.0, "a1", "a", 1),
        _entry(13.0, "a2", "a"),  # no turn: after the numbered ones
    )
    assert has_replayed_sessions(Workload.model_validate({"replay": {"path": "x"}}), entries)
    assert not has_replayed_sessions(WORKLOAD, entries)
    replayed = replayed_sessions(entries, 2.0, WordPrompts(), 0)
    sessions = [replayed.plan(i) for i in range(len(replayed.offsets_ns))]
    texts = [[s.plan_turn(t).prompt for t in range(s.turns)] for s in sessions]
    # Sessions start at their first turn's time (from the log's first line, scaled).
    assert texts == [["alone"], ["a0", "a1", "a2"], ["b0", "b1"]]
    assert replayed.offsets_ns == (1_000_000_000, 2_000_000_000, 2_400_000_000)
    assert all(s.captured for s in sessions)
    # Gaps are the captured ones between turns, scaled; never negative.
    assert sessions[1].gaps_ns == (2_000_000_000, 2_000_000_000)
    assert sessions[2].gaps_ns == (0,)
    # A record's seq is its line's index in timestamp order.
    assert [sessions[1].plan_turn(t).seq for t in range(3)] == [2, 4, 5]


def test_with_a_target_first_turns_repeat_the_stage_text_and_later_turns_add_none() -> None:
    workload = Workload.model_validate(
        {
            "mix": [{"prompt_tokens": {"dist": "fixed", "value": 40},
                     "output_tokens": {"dist": "fixed", "value": 4}}],
            "sessions": {"turns": 3},
            "prefix_cache": {"target_hit_rate": 0.5},
        }
    )  # fmt: skip
    plan = session_planner(workload, 3, 0, WordPrompts())
    seed, other = plan(0), plan(1)
    assert seed.plan_turn(0).cached_prefix_tokens == 0  # the stage's first request seeds it
    first = other.plan_turn(0)
    assert first.cached_prefix_tokens == 20
    assert first.prompt.split()[:20] == seed.plan_turn(0).prompt.split()[:20]
    later = other.plan_turn(1)
    assert later.cached_prefix_tokens == 0  # the conversation adds its context when sent
    assert later.prompt.split()[:20] != first.prompt.split()[:20]
