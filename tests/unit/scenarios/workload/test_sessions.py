"""workload.sessions: its distributions, bounds and shorthands, and the scenario rules
around it (what a session workload may be combined with, how a stage is counted)."""

from __future__ import annotations

import pytest

from scenarios.limits import MAX_SESSION_TURNS, MAX_TOTAL_REQUESTS
from scenarios.loader import ScenarioError, parse_scenario
from scenarios.workload.sessions import (
    DEFAULT_MAX_CONTEXT_TOKENS,
    ExponentialSeconds,
    FixedSeconds,
    FixedTurns,
    GeometricTurns,
    SessionsSpec,
    UniformTurns,
)

SIMULATED = "  - {name: sim, kind: simulated}\n"
MIX = "  mix:\n    - {prompt_tokens: {dist: fixed, value: 8}, output_tokens: {dist: fixed, value: 4}}\n"


def scenario(
    sessions: str = "{turns: 3}",
    load: str = "{concurrency: [2], sessions_per_level: 5}",
    providers: str = SIMULATED,
    extra: str = "",
) -> str:
    return (
        f"name: s\nproviders:\n{providers}workload:\n{MIX}  sessions: {sessions}\n{extra}"
        f"load: {load}\n"
    )


def problems(text: str) -> list[str]:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(text)
    return [f"{p.path}: {p.message}" for p in caught.value.problems]


def test_numbers_are_fixed_distributions_and_defaults_apply() -> None:
    spec = SessionsSpec.model_validate({"turns": 4})
    assert spec.turns == FixedTurns(dist="fixed", value=4)
    assert spec.think_time == FixedSeconds(dist="fixed", value=0.0)
    assert spec.max_context_tokens == DEFAULT_MAX_CONTEXT_TOKENS
    assert spec.max_turns() == 4
    spec = SessionsSpec.model_validate(
        {
            "turns": {"dist": "geometric", "mean": 3.5, "max": 12},
            "think_time": {"dist": "exponential", "mean": 2},
        }
    )
    assert spec.turns == GeometricTurns(dist="geometric", mean=3.5, max=12)
    assert isinstance(spec.think_time, ExponentialSeconds) and spec.max_turns() == 12
    assert SessionsSpec.model_validate({"turns": 2.0, "think_time": 1}).think_time.dist == "fixed"


def test_a_valid_session_scenario_parses() -> None:
    parsed = parse_scenario(scenario("{turns: {dist: uniform, min: 2, max: 6}, think_time: 0.5}"))
    assert parsed.workload.sessions is not None
    assert parsed.workload.sessions.turns == UniformTurns(dist="uniform", min=2, max=6)
    assert parsed.units_per_level() == 5
    # At most 6 turns of 5 sessions per stage, one provider and region.
    assert parsed.planned_requests() == 30


@pytest.mark.parametrize(
    ("sessions", "fragment"),
    [
        (f"{{turns: {MAX_SESSION_TURNS + 1}}}", "workload.sessions.turns"),
        ("{turns: {dist: uniform, min: 5, max: 2}}", "must not exceed max"),
        ("{turns: 0}", "workload.sessions.turns"),
        ("{turns: 3, think_time: -1}", "workload.sessions.think_time"),
        ("{turns: 3, think_time: 7200}", "workload.sessions.think_time"),
        ("{turns: 3, max_context_tokens: 1}", "workload.sessions.max_context_tokens"),
        ("{turns: 3, pause: 2}", "workload.sessions.pause"),
    ],
)
def test_bad_session_fields_name_their_path(sessions: str, fragment: str) -> None:
    found = problems(scenario(sessions))
    assert any(fragment in message for message in found), found


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (scenario(load="{concurrency: [2], requests_per_level: 5}"), "give sessions_per_level"),
        (scenario(load="{concurrency: [2]}"), "sessions_per_level, duration_s or both"),
        (
            scenario(providers="  - {name: t, kind: tgi, base_url: 'http://127.0.0.1:1'}\n"),
            "kind 'tgi'",
        ),
        (scenario(extra="  tools: {count: 1}\n"), "drop tools"),
        (scenario(extra="  images: {fraction: 0.5, width: 64, height: 64}\n"), "drop images"),
        (
            scenario(load="{sweep: {points: 2}, requests_per_level: 40, sessions_per_level: 2}"),
            "drop workload.sessions",
        ),
        (
            "name: s\nproviders:\n"
            + SIMULATED
            + "workload:\n"
            + MIX
            + "load: {concurrency: [1], requests_per_level: 2, sessions_per_level: 2}\n",
            "none are set",
        ),
        (
            scenario(load="{rate: {rps: [1000]}, duration_s: 86400}", sessions="{turns: 1000}"),
            f"more than the {MAX_TOTAL_REQUESTS:,}",
        ),
    ],
)
def test_session_rules(text: str, fragment: str) -> None:
    found = problems(text)
    assert any(fragment in message for message in found), found


def test_sessions_cannot_replay_or_use_a_prompt_file() -> None:
    replayed = (
        "name: s\nproviders:\n" + SIMULATED
        + "workload:\n  replay: {path: log.jsonl}\n  sessions: {turns: 2}\nload: {}\n"
    )  # fmt: skip
    assert any("session_id" in m for m in problems(replayed))
    prompted = scenario(extra="  prompts: {path: p.jsonl}\n")
    assert any("drop prompts" in m for m in problems(prompted))
