"""The next stages of an adaptive run, decided while it goes (docs/answers.md).

Once every stage so far settled, the control plane decides the next stages of a sweep
or a capacity search, for all regions together: each is planned like a stage of a fixed
plan and *appended* to the stored plan, so the plan stays the record of what ran and
views, progress, REST and a restarted control plane read it as before. The decision is
a function of the stored results only (``analytics/decide/capacity_search.py``,
``analytics/decide/sweep.py``), so a restarted control plane decides exactly what the first
would have. The running stage's early ends are ``api/control/adaptive/monitor.py``.

The queries run on a cursor of their own in a worker thread: the control loop keeps
serving every run meanwhile.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

import duckdb

from analytics.decide.capacity_search import (
    Probe,
    Role,
    Verdict,
    next_step,
    provider_verdict,
    region_verdict,
    wilson,
)
from analytics.decide.sweep import sweep_rates
from analytics.store.adaptive_runs import (
    CapacityRow,
    RegionFigures,
    RoleRow,
    VerdictRow,
    capacity_rows,
    measured_rates,
    outcome_rows,
    role_rows,
    stage_figures,
    verdict_rows,
    write_capacity,
    write_roles,
    write_verdict,
)
from analytics.store.runs import RunStore, transaction
from api.control.planner import Stage, plan_decided_stage, planned_shards
from scenarios.limits import MAX_DURATION_S
from scenarios.load.adaptive import FindCapacity
from scenarios.loader import ScenarioError
from scenarios.model import Scenario

__all__ = ["PROBE_MARGIN", "Decided", "decide_next", "judge_stage"]

# A probe's stage is long enough for this many times the requests a pass needs (arrivals
# are random, and some may still be in flight when it ends).
PROBE_MARGIN = 1.25


@dataclass(frozen=True, slots=True)
class Decided:
    """What deciding produced: stages to append (already stored) with their roles, and
    whether the load decides any more after them."""

    stages: list[Stage]
    done: bool
    roles: list[RoleRow] = field(default_factory=list)


def decide_next(
    con: duckdb.DuckDBPyConnection,
    run_id: str,
    scenario: Scenario,
    stages: Sequence[Stage],
    workers: Mapping[str, int],
    max_streams_per_shard: int,
) -> Decided:
    """Judge the settled stages, decide the next ones and store them (one transaction).
    Called when every stage so far settled."""
    with transaction(con):
        if scenario.load.sweep is not None:
            decided = _decide_sweep(con, run_id, scenario, stages, workers, max_streams_per_shard)
        elif scenario.load.find_capacity is not None:
            decided = _decide_capacity(
                con, run_id, scenario, stages, workers, max_streams_per_shard
            )
        else:
            decided = Decided([], True)
    return decided


def _store_stage(
    con: duckdb.DuckDBPyConnection, run_id: str, stage: Stage, roles: list[RoleRow]
) -> list[RoleRow]:
    RunStore(con).append_shards(run_id, planned_shards([stage]))
    write_roles(con, run_id, roles)
    return roles


def _shard_count(stages: Sequence[Stage]) -> int:
    return sum(len(stage.shards) for stage in stages)


def _decide_sweep(
    con: duckdb.DuckDBPyConnection,
    run_id: str,
    scenario: Scenario,
    stages: Sequence[Stage],
    workers: Mapping[str, int],
    max_streams_per_shard: int,
) -> Decided:
    sweep = scenario.load.sweep
    assert sweep is not None
    if len(stages) != 2:
        return Decided([], True)  # the rates were decided once, after the throughput stage
    sync, throughput = measured_rates(con, run_id, 0), measured_rates(con, run_id, 1)
    rates = {
        p.name: sweep_rates(sync[p.name], throughput[p.name], sweep.points)
        for p in scenario.providers
        if p.name in sync and p.name in throughput
    }
    decided: list[Stage] = []
    stored: list[RoleRow] = []
    for point in range(sweep.points):
        index = len(stages) + point
        levels = {name: values[point] for name, values in rates.items()}
        if not levels:
            break
        try:
            stage = plan_decided_stage(
                run_id, scenario, index, levels, "open",
                _shard_count([*stages, *decided]), max_streams_per_shard, workers=workers,
            )  # fmt: skip
        except ScenarioError:
            break  # the shard cap: the sweep ends with the points it could plan
        roles = [
            RoleRow(
                index, name, "sweep", "open", level,
                f"point {point + 1} of {sweep.points} between {sync[name]:.4g} (synchronous) "
                f"and {throughput[name]:.4g} req/s (throughput)",
            )
            for name, level in levels.items()
        ]  # fmt: skip
        stored += _store_stage(con, run_id, stage, roles)
        decided.append(stage)
    return Decided(decided, True, stored)


def _attempts(con: duckdb.DuckDBPyConnection, run_id: str, stage: int) -> list[tuple[str, int]]:
    rows = con.execute(
        "SELECT shard_id, accepted_attempt FROM shards "
        "WHERE run_id = ? AND stage = ? AND accepted_attempt IS NOT NULL",
        [run_id, stage],
    ).fetchall()
    return [(str(r[0]), int(r[1])) for r in rows]


def _failed_providers(con: duckdb.DuckDBPyConnection, run_id: str, stage: int) -> dict[str, str]:
    rows = con.execute(
        "SELECT provider, any_value(message) FROM shards WHERE run_id = ? AND stage = ? "
        "AND state IN ('failed', 'cancelled') GROUP BY provider",
        [run_id, stage],
    ).fetchall()
    return {str(r[0]): str(r[1] or "failed") for r in rows}


def judge_stage(
    figures: Sequence[RegionFigures],
    provider: str,
    config: FindCapacity,
    confidence: float,
    saturated: bool,
) -> tuple[Verdict, dict[str, Any], tuple[int, int, float | None, float | None]]:
    """A provider's verdict on a stage from its regions' figures: the verdict, each
    region's figures, and (requests, met, low, high) of its worst region."""
    regions: dict[str, Any] = {}
    verdicts: list[Verdict] = []
    worst: tuple[int, int, float | None, float | None] = (0, 0, None, None)
    worst_low = 2.0
    for row in figures:
        if row.provider != provider:
            continue
        low, high = wilson(row.met, row.requests, confidence)
        verdict = region_verdict(row.met, row.requests, config.attainment, confidence)
        verdicts.append(verdict)
        regions[row.region] = {
            "requests": row.requests,
            "met": row.met,
            "attainment": row.met / row.requests if row.requests else None,
            "low": low,
            "high": high,
            "verdict": verdict,
        }
        if low < worst_low:
            worst_low, worst = low, (row.requests, row.met, low, high)
    return provider_verdict(verdicts, saturated), regions, worst


def _judge_settled(
    con: duckdb.DuckDBPyConnection,
    run_id: str,
    scenario: Scenario,
    stages: Sequence[Stage],
    roles: Mapping[tuple[int, str], RoleRow],
) -> None:
    config = scenario.load.find_capacity
    assert config is not None
    judged = {(v.stage, v.provider) for v in verdict_rows(con, run_id)}
    outcomes = {(o.stage, o.provider): o for o in outcome_rows(con, run_id)}
    for stage in stages:
        providers = {
            provider
            for (index, provider), role in roles.items()
            if index == stage.index and role.role in ("synchronous", "probe")
        }
        todo = sorted(p for p in providers if (stage.index, p) not in judged)
        if not todo:
            continue
        figures = stage_figures(
            con, run_id, stage.index, _attempts(con, run_id, stage.index),
            scenario.load.warmup_s, config.slo, None,
        )  # fmt: skip
        rates = measured_rates(con, run_id, stage.index)
        for provider in todo:
            outcome = outcomes.get((stage.index, provider))
            saturated = outcome is not None and outcome.outcome == "saturated"
            # The final look spends half the error; early looks spent the rest.
            verdict, regions, worst = judge_stage(
                figures, provider, config, 1 - (1 - config.confidence) / 2, saturated
            )
            early = (outcome.evidence.get("verdict") if outcome is not None else None) or None
            if early in ("pass", "fail"):
                verdict = early  # the early look decided; its test is the one that counts
            requests, met, low, high = worst
            write_verdict(
                con,
                run_id,
                VerdictRow(
                    stage.index, provider, verdict, met / requests if requests else None, low,
                    high, requests, met, rates.get(provider), regions,
                ),
            )  # fmt: skip


def _decide_capacity(
    con: duckdb.DuckDBPyConnection,
    run_id: str,
    scenario: Scenario,
    stages: Sequence[Stage],
    workers: Mapping[str, int],
    max_streams_per_shard: int,
) -> Decided:
    config = scenario.load.find_capacity
    assert config is not None
    roles = {(r.stage, r.provider): r for r in role_rows(con, run_id)}
    _judge_settled(con, run_id, scenario, stages, roles)
    verdicts = {(v.stage, v.provider): v for v in verdict_rows(con, run_id)}
    known = {c.provider: c for c in _capacity_by_provider(con, run_id)}
    rates = {stage.index: measured_rates(con, run_id, stage.index) for stage in stages}
    levels: dict[str, float] = {}
    reasons: dict[str, str] = {}
    for provider in scenario.providers:
        name = provider.name
        previous = known.get(name)
        if previous is not None and previous.state != "searching":
            continue  # its search ended earlier
        failed = _provider_failure(con, run_id, stages, name)
        probes = [
            Probe(
                stage.index,
                cast(Role, roles[(stage.index, name)].role),  # as stored by this module
                roles[(stage.index, name)].level,
                cast(Verdict, verdicts[(stage.index, name)].verdict)
                if (stage.index, name) in verdicts else None,
                rates[stage.index].get(name),
            )
            for stage in stages
            if (stage.index, name) in roles
        ]  # fmt: skip
        if failed is not None:
            row = CapacityRow(name, config.by, "failed", None, None, None, None, len(probes),
                              failed)  # fmt: skip
        else:
            state = next_step(config, probes)
            row = CapacityRow(
                name, config.by, state.state, state.low, state.high, state.low_stage,
                state.high_stage, len(probes), state.message,
            )  # fmt: skip
            if state.next_level is not None:
                levels[name] = state.next_level
                reasons[name] = state.message
        write_capacity(con, run_id, row)
    if not levels:
        return Decided([], True)
    index = len(stages)
    kind: Literal["open", "closed"] = "open" if config.by == "rate" else "closed"
    try:
        stage = plan_decided_stage(
            run_id, scenario, index, levels, kind, _shard_count(stages), max_streams_per_shard,
            workers=workers, durations=_probe_durations(scenario, levels, kind),
        )  # fmt: skip
    except ScenarioError as exc:
        for name in levels:
            row = next(c for c in _capacity_by_provider(con, run_id) if c.provider == name)
            write_capacity(con, run_id, _ended(row, "max_stages", exc.problems[0].message))
        return Decided([], True)
    new_roles = [
        RoleRow(index, name, "probe", kind, level, reasons[name]) for name, level in levels.items()
    ]
    return Decided([stage], False, _store_stage(con, run_id, stage, new_roles))


def _probe_durations(
    scenario: Scenario, levels: Mapping[str, float], kind: str
) -> dict[str, float | None] | None:
    """An open-loop probe runs at least long enough to send the requests a pass needs:
    a ``duration_s`` that would end it sooner could only ever leave it undecided (its
    requests stay bounded by ``requests_per_level``)."""
    load, search = scenario.load, scenario.load.find_capacity
    if kind != "open" or load.duration_s is None or search is None:
        return None
    needed = PROBE_MARGIN * search.requests_to_pass()
    return {
        name: min(MAX_DURATION_S, max(load.duration_s, load.warmup_s + needed / rate))
        for name, rate in levels.items()
    }


def _ended(row: CapacityRow, state: str, message: str) -> CapacityRow:
    return CapacityRow(
        row.provider, row.search_by, state, row.low, row.high, row.low_stage, row.high_stage,
        row.stages, message,
    )  # fmt: skip


def _capacity_by_provider(con: duckdb.DuckDBPyConnection, run_id: str) -> list[CapacityRow]:
    return capacity_rows(con, run_id)


def _provider_failure(
    con: duckdb.DuckDBPyConnection, run_id: str, stages: Sequence[Stage], provider: str
) -> str | None:
    for stage in stages:
        failed = _failed_providers(con, run_id, stage.index)
        if provider in failed:
            return f"stage {stage.index} failed: {failed[provider]}"
    return None
