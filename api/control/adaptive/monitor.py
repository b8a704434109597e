"""Stages ended early while they run (docs/answers.md).

An early end of the running stage for one provider, decided by the control plane from
what the workers streamed, for all regions of the stage together: over-saturated (an
open loop whose queue grows without bound: ``analytics/decide/saturation.py``), its
percentile's interval tight enough (``load.stop_when``: ``analytics/decide/early_stop.py``),
or a capacity stage's verdict already certain. The provider's shards in every region are
told to stop sending (``scenarios.wire.contract.stop_key``); they finish normally with what they
recorded, and the stage is marked with its evidence (``stage_outcomes``).

The queries run on a cursor of their own in a worker thread (``stage_figures`` reads a
running stage's stored rows), at most every ``MONITOR_INTERVAL_S``, spaced out when
they are slow (``MONITOR_COST_FACTOR``, up to ``MAX_MONITOR_INTERVAL_S``): the control
loop keeps serving every run meanwhile.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any, Literal

import duckdb

from analytics.decide.capacity_search import interim_alpha
from analytics.decide.early_stop import QuantileInterval, tight_enough
from analytics.decide.saturation import ShardSamples, StageSnapshot, judge
from analytics.store.adaptive_runs import OutcomeRow, RegionFigures, stage_figures
from api.control.adaptive.decide import judge_stage
from scenarios.model import Scenario

__all__ = [
    "MAX_MONITOR_INTERVAL_S",
    "MONITOR_COST_FACTOR",
    "MONITOR_INTERVAL_S",
    "MonitorInput",
    "MonitorResult",
    "ProviderLive",
    "StopDecision",
    "monitor_stage",
    "outcome_row",
]

MONITOR_INTERVAL_S = 2.0
# A slow check (a large stage, a loaded machine) spaces the next one out: it waits this
# many times as long as the last query took, up to MAX_MONITOR_INTERVAL_S, so the
# queries take at most a fifth of a core and a stage is still looked at every few seconds.
MONITOR_COST_FACTOR = 5
MAX_MONITOR_INTERVAL_S = 6.0
# A capacity stage's first early look waits for enough requests that a verdict is
# possible at all (with every request meeting the SLO, the Wilson bound reaches a target
# t only past n ≈ z²·t/(1 − t)); later looks come at twice as many requests each.
_FIRST_LOOK_MIN = 20


@dataclass(frozen=True, slots=True)
class ProviderLive:
    """One provider's shards in the running stage, as the control plane knows them."""

    role: str | None  # its role when the load is adaptive
    offered_rps: float | None  # open loop: per region
    cap: int | None  # open loop: max_in_flight per region
    elapsed_s: float  # its stage clock so far (the longest of its shards')
    planned: int | None
    done: int
    regions: dict[str, list[ShardSamples]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class MonitorInput:
    """What a check of the running stage reads, gathered on the control loop."""

    run_id: str
    stage: int
    scenario: Scenario
    attempts: list[tuple[str, int]]
    providers: dict[str, ProviderLive]
    looks: dict[str, int]  # capacity stages: early looks taken so far, by provider


@dataclass(frozen=True, slots=True)
class StopDecision:
    """A provider's stage ends early (or is marked), with why."""

    provider: str
    outcome: Literal["saturated", "stopped_early"]
    acted: bool
    reason: str
    evidence: dict[str, Any]


@dataclass(frozen=True, slots=True)
class MonitorResult:
    """A check's decisions, the looks it took, and how long its query ran."""

    decisions: list[StopDecision]
    looks: dict[str, int]
    seconds: float


def monitor_stage(con: duckdb.DuckDBPyConnection, inputs: MonitorInput) -> MonitorResult:
    """Check the running stage: which providers' shards should stop now."""
    started = time.perf_counter()
    load = inputs.scenario.load
    search = load.find_capacity
    figures = stage_figures(
        con, inputs.run_id, inputs.stage, inputs.attempts, load.warmup_s,
        search.slo if search is not None else None, load.stop_when,
    )  # fmt: skip
    decisions: list[StopDecision] = []
    looks = dict(inputs.looks)
    for provider, live in inputs.providers.items():
        mine = [f for f in figures if f.provider == provider]
        decision = (
            _saturated(inputs.scenario, provider, live, mine)
            or _capacity_decided(inputs.scenario, provider, live, mine, looks)
            or _tight(inputs.scenario, provider, live, mine)
        )
        if decision is not None:
            decisions.append(decision)
    return MonitorResult(decisions, looks, time.perf_counter() - started)


def _saturated(
    scenario: Scenario, provider: str, live: ProviderLive, figures: Sequence[RegionFigures]
) -> StopDecision | None:
    action = scenario.load.saturation_action
    if action == "off" or live.offered_rps is None:
        return None  # a closed loop's queue is bounded by its streams
    rule = scenario.load.saturation
    min_s = rule.min_s if rule is not None else 5.0
    min_requests = rule.min_requests if rule is not None else 40
    by_region = {f.region: f for f in figures}
    for region, shards in sorted(live.regions.items()):
        row = by_region.get(region)
        if row is None:
            continue
        snapshot = StageSnapshot(
            live.elapsed_s, row.requests, live.offered_rps, live.cap, shards, row.ttft_quarters_ms
        )
        found = judge(snapshot, min_s, min_requests)
        if found is not None:
            reason, evidence = found
            evidence["region"] = region
            return StopDecision(provider, "saturated", action == "stop",
                                f"{region}: {reason}", evidence)  # fmt: skip
    return None


def _capacity_decided(
    scenario: Scenario,
    provider: str,
    live: ProviderLive,
    figures: Sequence[RegionFigures],
    looks: dict[str, int],
) -> StopDecision | None:
    config = scenario.load.find_capacity
    if config is None or live.role not in ("synchronous", "probe") or not figures:
        return None
    smallest = min(f.requests for f in figures)
    look = looks.get(provider, 0) + 1
    confidence = 1 - interim_alpha(look, config.confidence)
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    first = max(_FIRST_LOOK_MIN, math.ceil(z * z * config.attainment / (1 - config.attainment)))
    if smallest < first * 2 ** (look - 1):
        return None
    looks[provider] = look
    verdict, regions, worst = judge_stage(figures, provider, config, confidence, False)
    if verdict != "fail":
        # Only a failure ends a stage early: near the capacity an open loop's queue builds
        # slowly, so its first requests look better than its last; a pass needs them all.
        return None
    requests, met, low, high = worst
    reason = (
        f"decided early: does not hold (attainment {met}/{requests}, interval "
        f"{low:.3f}–{high:.3f} at {confidence:.4g} confidence vs target "
        f"{config.attainment:g}; look {look})"
    )
    evidence = {"verdict": verdict, "look": look, "confidence": confidence, "regions": regions}
    return StopDecision(provider, "stopped_early", True, reason, evidence)


def _tight(
    scenario: Scenario, provider: str, live: ProviderLive, figures: Sequence[RegionFigures]
) -> StopDecision | None:
    rule = scenario.load.stop_when
    if rule is None or len(figures) < len(live.regions):
        return None
    intervals = [QuantileInterval(f.region, f.n, f.estimate, f.low, f.high) for f in figures]
    if not tight_enough(intervals, rule.min_requests, rule.rel_ci):
        return None
    widest = max(intervals, key=lambda i: i.relative_half_width or 0.0)
    label = f"{rule.metric.upper()} p{rule.quantile * 100:g}"
    reason = (
        f"{label} known within ±{(widest.relative_half_width or 0) * 100:.1f} % "
        f"(stop_when.rel_ci {rule.rel_ci:g}) after {min(i.n for i in intervals)} requests"
    )
    evidence = {
        "metric": rule.metric,
        "quantile": rule.quantile,
        "confidence": rule.confidence,
        "rel_ci": rule.rel_ci,
        "regions": {
            i.region: {"n": i.n, "estimate_ms": i.estimate, "low_ms": i.low, "high_ms": i.high,
                       "relative_half_width": i.relative_half_width}
            for i in intervals
        },
    }  # fmt: skip
    return StopDecision(provider, "stopped_early", True, reason, evidence)


def outcome_row(stage: int, decision: StopDecision, live: ProviderLive) -> OutcomeRow:
    """The row recording ``decision``."""
    return OutcomeRow(
        stage, decision.provider, decision.outcome, decision.acted, decision.reason,
        decision.evidence, live.planned, live.done, live.elapsed_s,
    )  # fmt: skip
