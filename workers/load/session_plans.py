"""Deterministic plans of multi-turn sessions (docs/workloads.md, "Multi-turn sessions").

Session ``n`` of stage ``s`` is the same for every provider and region: its number of
turns, its think times and each turn's new user message and answer length depend only
on the scenario seed. Turn ``t`` (from 0) of session ``n`` is request
``n × MAX_SESSION_TURNS + t`` of the stage's request plan (``workers/prompts/plan.py``), so
turns are sized by the same prompt maker, from the same mix; only the first turn starts
with the workload's shared prefix (a conversation's system prompt is sent once, at its
start, and stays at the front of every later turn). Turns are planned when the session
reaches them, so a long session never holds all its text at once.

What is *sent* for turn t > 1 also holds the earlier answers, which are the provider's
own (``workers/load/conversation.py``): the plan is identical, the bytes sent are not.

A replayed log's sessions (``session_id`` on its lines) are planned from the log: each
session's lines in turn order, sent as captured; gaps between turns are the captured
ones (scaled by ``time_scale``).
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from scenarios.datasets.files import FileEntry
from scenarios.limits import MAX_SESSION_TURNS
from scenarios.workload.prefix_cache import PrefixCacheSpec
from scenarios.workload.sessions import (
    ExponentialSeconds,
    FixedSeconds,
    FixedTurns,
    GeometricTurns,
    LognormalSeconds,
    ThinkTime,
    Turns,
    UniformSeconds,
    UniformTurns,
)
from scenarios.workload.spec import Workload
from workers.prompts.plan import PlannedRequest, PromptMaker, plan_from_entry, request_planner

__all__ = [
    "PlannedSession",
    "ReplayedSessions",
    "has_replayed_sessions",
    "replayed_sessions",
    "sample_seconds",
    "sample_turns",
    "session_planner",
    "turn_seq",
]

NS_PER_S = 1_000_000_000


@dataclass(frozen=True, slots=True)
class PlannedSession:
    """One session of the plan: ``turns`` turns, ``plan_turn(t)`` the t-th (from 0), and
    ``gaps_ns[t]`` the wait before turn t + 1: a think time counted from the end of the
    previous answer (generated), or a captured gap counted from the previous turn's
    intended start and never before its answer ended (``captured``)."""

    session_id: int
    turns: int
    gaps_ns: tuple[int, ...]
    plan_turn: Callable[[int], PlannedRequest]
    captured: bool = False


def turn_seq(session: int, turn: int) -> int:
    """The request sequence number of turn ``turn`` (from 0) of session ``session``."""
    return session * MAX_SESSION_TURNS + turn


def session_planner(
    workload: Workload, seed: int, stage: int, maker: PromptMaker | None = None
) -> Callable[[int], PlannedSession]:
    """``session -> PlannedSession`` for one stage of a workload with ``sessions``."""
    spec = workload.sessions
    assert spec is not None, "a session plan needs workload.sessions"
    first = request_planner(workload, seed, stage, None, maker)
    # Later turns are new user messages: the shared prefix is already at the front, and
    # with a target hit rate what they repeat is the conversation itself (none of their
    # own words; the conversation adds its context to their planned cached tokens).
    update: dict[str, object] = {"shared_prefix_tokens": 0}
    if workload.prefix_cache is not None:
        update["prefix_cache"] = PrefixCacheSpec(target_hit_rate=0)
    later = request_planner(workload.model_copy(update=update), seed, stage, None, maker)

    def plan(session: int) -> PlannedSession:
        rng = random.Random(f"{seed}/{stage}/session/{session}")  # stable (SHA-512 seed)
        turns = sample_turns(spec.turns, rng)
        gaps = tuple(
            round(sample_seconds(spec.think_time, rng) * NS_PER_S) for _ in range(turns - 1)
        )

        def plan_turn(turn: int) -> PlannedRequest:
            return (first if turn == 0 else later)(turn_seq(session, turn))

        return PlannedSession(session, turns, gaps, plan_turn)

    return plan


def sample_turns(dist: Turns, rng: random.Random) -> int:
    """Draw a session's number of turns."""
    match dist:
        case FixedTurns(value=value):
            return value
        case UniformTurns(min=low, max=high):
            return rng.randint(low, high)
        case GeometricTurns(mean=mean, max=high):
            if mean <= 1:
                return 1
            # P(k) = p (1 - p)^(k - 1), p = 1 / mean: the count of trials to a success.
            p = 1.0 / mean
            draw = 1 + math.floor(math.log(1.0 - rng.random()) / math.log(1.0 - p))
            return max(1, min(high, draw))
    raise TypeError(f"unknown turns distribution {dist!r}")


def sample_seconds(dist: ThinkTime, rng: random.Random) -> float:
    """Draw one think time (seconds)."""
    match dist:
        case FixedSeconds(value=value):
            return value
        case UniformSeconds(min=low, max=high):
            return rng.uniform(low, high)
        case ExponentialSeconds(mean=mean, max=high):
            return min(rng.expovariate(1.0 / mean), high)
        case LognormalSeconds(mean=mean, sigma=sigma, max=high):
            mu = math.log(mean) - sigma * sigma / 2  # so that E[seconds] == mean
            return min(rng.lognormvariate(mu, sigma), high)
    raise TypeError(f"unknown think time distribution {dist!r}")


# --------------------------------------------------------------------------- replay


def has_replayed_sessions(workload: Workload, entries: Sequence[FileEntry] | None) -> bool:
    """True when the workload replays a log some of whose lines name a session."""
    return workload.replay is not None and any(e.session_id is not None for e in entries or ())


@dataclass(frozen=True, slots=True)
class ReplayedSessions:
    """A session log's sessions in the order they start: ``offsets_ns[i]`` is session
    i's first turn's offset from the log's first line, ``plan(i)`` the session."""

    offsets_ns: tuple[int, ...]
    plan: Callable[[int], PlannedSession]


def replayed_sessions(
    entries: Sequence[FileEntry],
    time_scale: float,
    maker: PromptMaker,
    seed: int,
    prefix_tokens: int = 0,
    dataset_id: str | None = None,
) -> ReplayedSessions:
    """Group a replay log's lines (in timestamp order) into sessions: the lines of one
    ``session_id`` in ``turn`` order (timestamp order where turns tie or are missing);
    a line without a session id is a session of one turn. Record ``seq`` is the line's
    index in timestamp order."""
    groups: dict[str, list[int]] = {}
    singles: list[list[int]] = []
    ordered: list[list[int]] = []
    for index, entry in enumerate(entries):
        if entry.session_id is None:
            singles.append([index])
            ordered.append(singles[-1])
            continue
        group = groups.get(entry.session_id)
        if group is None:
            group = groups[entry.session_id] = []
            ordered.append(group)
        group.append(index)
    for group in groups.values():
        group.sort(key=lambda i: (_turn_key(entries[i]), i))
    first = (entries[0].timestamp_s or 0.0) if entries else 0.0

    def offset(group: list[int]) -> int:
        start = entries[group[0]].timestamp_s or 0.0
        return round((start - first) * time_scale * NS_PER_S)

    sessions = sorted(ordered, key=lambda group: (offset(group), group[0]))

    def plan(session: int) -> PlannedSession:
        group = sessions[session]
        stamps = [entries[i].timestamp_s or 0.0 for i in group]
        gaps = tuple(
            round(max(0.0, later - earlier) * time_scale * NS_PER_S)
            for earlier, later in itertools.pairwise(stamps)
        )

        def plan_turn(turn: int) -> PlannedRequest:
            index = group[turn]
            entry = entries[index]
            return plan_from_entry(
                index, entry, maker, seed, prefix_tokens, entry.max_tokens or 1, dataset_id
            )

        return PlannedSession(session, len(group), gaps, plan_turn, captured=True)

    return ReplayedSessions(tuple(offset(group) for group in sessions), plan)


def _turn_key(entry: FileEntry) -> float:
    # Lines without a turn keep their timestamp order among themselves, after numbered ones.
    return float(entry.turn) if entry.turn is not None else math.inf
