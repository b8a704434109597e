"""The public view of a run: live from the control plane, or as stored once it ended."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import duckdb

from analytics.datasets.uploads import DatasetStore
from analytics.report.build import UnknownRunError
from analytics.sql.results import first_row
from analytics.store.adaptive_runs import OutcomeRow, outcome_rows, role_rows
from analytics.store.runs import RunStore
from api.control.coordinator import Coordinator
from api.control.parts import DEFAULT_MAX_STREAMS_PER_SHARD
from api.control.planner import Stage, plan_run, stored_stages
from api.control.queue import QueuedRun, Waiting
from api.control.run_coordinator import RunCoordinator
from api.control.spend import stop_reason
from api.schemas import QueuePublic, RunPublic, ShardPublic, StageEndPublic, StagePublic
from scenarios.model import Scenario
from scenarios.wire.contract import SETTLED, RunState, ShardState


@dataclass(frozen=True)
class LiveState:
    """What of a coordinator the live view iterates and the control loop may replace or
    grow meanwhile (adaptive stages, roles, early ends): copied on the loop, in O(stages),
    so that the view itself (O(shards)) can be built in another thread."""

    state: str
    stages: list[Stage]
    roles: dict[tuple[int, str], str]
    ended: dict[int, list[StageEndPublic]]
    deciding: bool


def live_state(coordinator: Coordinator) -> LiveState:
    """The copy :func:`live_view` reads; take it on the thread that drives ``coordinator``."""
    if isinstance(coordinator, RunCoordinator):
        return LiveState(
            coordinator.state,
            list(coordinator.stages),
            dict(coordinator.roles),
            _live_ends(coordinator),
            coordinator.adaptive.deciding and not coordinator.adaptive.decided_all,
        )
    return LiveState(coordinator.state, list(coordinator.stages), {}, {}, False)


def live_view(coordinator: Coordinator, name: str, state: LiveState | None = None) -> RunPublic:
    """A running run, from the coordinator's in-memory state (``state``: a copy taken on
    the loop, when the view is built in another thread; a shard's figures may then be a
    moment newer than the copy)."""
    live = state or live_state(coordinator)
    stages = []
    for stage in live.stages:
        shards = [coordinator.shards[s.shard_id] for s in list(stage.shards)]
        states = {s.state for s in shards}
        stages.append(
            StagePublic(
                index=stage.index,
                concurrency=stage.concurrency,
                rate=stage.rate,
                state=_stage_state(states),
                role=_stage_role(live.roles, stage.index),
                ended=live.ended.get(stage.index, []),
                shards=[
                    ShardPublic(
                        shard_id=s.spec.shard_id,
                        provider=s.spec.provider.name,
                        region=s.spec.region,
                        state=s.state,
                        concurrency=s.spec.concurrency,
                        attempt=s.attempt,
                        requests_done=s.done,
                        requests_planned=s.planned,
                        errors=s.errors,
                        ttft_p50_ms=s.ttft_p50_ms,
                        message=s.message,
                        rate=stage.rate_of(s.spec.provider.name),
                    )
                    for s in shards
                ],
            )
        )
    view = _summarise(coordinator.run_id, name, live.state, stages)
    if isinstance(coordinator, RunCoordinator):
        view.deciding = live.deciding
        if view.deciding:
            view.requests_planned = None  # the stages still to decide are not counted
    return view


def _stage_role(roles: dict[tuple[int, str], str], index: int) -> str | None:
    """The stage's role (every provider of a decided stage has the same one)."""
    return next((role for (stage, _), role in roles.items() if stage == index), None)


def _live_ends(coordinator: RunCoordinator) -> dict[int, list[StageEndPublic]]:
    """Early ends as decided (kept by the coordinator, as stored)."""
    return _ends(sorted(coordinator.adaptive.ended.values(), key=lambda r: (r.stage, r.provider)))


def _ends(rows: list[OutcomeRow]) -> dict[int, list[StageEndPublic]]:
    ends: dict[int, list[StageEndPublic]] = {}
    for row in rows:
        ends.setdefault(row.stage, []).append(
            StageEndPublic(
                provider=row.provider, outcome=row.outcome, acted=row.acted, reason=row.reason
            )
        )
    return ends


def _stage_state(states: set[ShardState]) -> ShardState:
    """A stage's state from its shards': settled when all are, failed if any failed."""
    if states == {ShardState.FINISHED}:
        return ShardState.FINISHED
    if states <= {ShardState.PLANNED}:
        return ShardState.PLANNED
    if states <= SETTLED:
        return ShardState.FAILED if ShardState.FAILED in states else ShardState.CANCELLED
    return ShardState.RUNNING


def stored_view(
    con: duckdb.DuckDBPyConnection,
    run_id: str,
    max_streams_per_shard: int = DEFAULT_MAX_STREAMS_PER_SHARD,
) -> RunPublic:
    """A run as stored in DuckDB (finished, failed, cancelled, or owned by nobody).

    Linear in the run's shards, and read as stored: a stage's level and rates come from
    its shards' stored level and spec (``rate.rps``) by SQL, not by parsing every stored
    spec (a 10,000-shard run's specs took ~0.8 s of CPU to validate). Only a run stored
    before plans were (schema v7) is re-planned, with ``max_streams_per_shard``."""
    run = first_row(
        con.execute(
            "SELECT name, state, created_at, finished_at, scenario FROM runs WHERE run_id = ?",
            [run_id],
        )
    )
    if run is None:
        raise UnknownRunError(run_id)
    rows = con.execute(
        """
        SELECT s.shard_id, s.stage, s.provider, s.region, s.state, s.accepted_attempt,
               s.planned_requests, s.message,
               count(r.seq) AS done, count(r.seq) FILTER (r.status = 'error') AS errors,
               quantile_cont(r.ttft_ns / 1e6, 0.5) FILTER (r.status = 'ok') AS ttft_p50,
               s.plan_position, s.concurrency, s.stage_concurrency,
               TRY_CAST(json_extract_string(s.spec, '$.rate.rps') AS DOUBLE) AS rps,
               s.spec IS NULL AS unplanned
        FROM shards AS s
        LEFT JOIN request_records AS r
               ON r.run_id = s.run_id AND r.shard_id = s.shard_id AND r.attempt = s.accepted_attempt
        WHERE s.run_id = ?
        GROUP BY ALL
        -- In plan order, as the live view lists them (runs stored before plans were have
        -- no position: by name).
        ORDER BY s.stage, s.plan_position, s.provider, s.region, s.shard_id
        """,
        [run_id],
    ).fetchall()
    by_stage: dict[int, list[tuple[Any, ...]]] = {}
    for row in rows:
        by_stage.setdefault(row[1], []).append(row)
    if rows and not any(row[15] for row in rows):
        plan = _stored_stages(by_stage)
    else:
        scenario = Scenario.model_validate_json(run[4])
        plan = _planned_stages(con, run_id, scenario, max_streams_per_shard)
    stages = []
    roles = {(r.stage, r.provider): r.role for r in role_rows(con, run_id)}
    ended = _ends(outcome_rows(con, run_id))
    for stage in plan:
        index = stage.index
        shards = [
            ShardPublic(
                shard_id=r[0],
                provider=r[2],
                region=r[3],
                state=r[4],
                concurrency=r[12],
                attempt=r[5],
                requests_done=r[8],
                requests_planned=r[6],
                errors=r[9],
                ttft_p50_ms=r[10],
                message=r[7],
                rate=stage.rate_of(r[2]),
            )
            for r in by_stage.get(index, [])
        ]
        states = {ShardState(s.state) for s in shards}
        state = _stage_state(states)
        stages.append(
            StagePublic(
                index=index,
                concurrency=stage.concurrency,
                rate=stage.rate,
                state=state,
                shards=shards,
                role=_stage_role(roles, index),
                ended=ended.get(index, []),
            )
        )
    view = _summarise(run_id, run[0], run[1], stages)
    view.created_at, view.finished_at = run[2], run[3]
    view.reason, view.reason_detail = stop_reason(con, run_id)  # budget: spend stopped it
    imported = first_row(con.execute("SELECT tool FROM run_imports WHERE run_id = ?", [run_id]))
    if imported is not None:  # another tool's result (docs/import.md)
        view.kind, view.tool = "imported", str(imported[0])
    return view


def _stored_stages(by_stage: dict[int, list[tuple[Any, ...]]]) -> list[Stage]:
    """The stages of a stored plan from the view's rows (in plan order within a stage),
    as :func:`api.control.planner.stored_stages` makes them from the parsed specs: the
    stage's level and rate are its first shard's, each provider's its own."""
    stages = []
    for index in sorted(by_stage):
        rows = by_stage[index]
        first = rows[0]
        stage = Stage(index, int(first[13]), [], first[14])
        for row in rows:
            stage.levels[row[2]] = int(row[13])
            stage.rates[row[2]] = row[14]
        stages.append(stage)
    return stages


def _planned_stages(
    con: duckdb.DuckDBPyConnection, run_id: str, scenario: Scenario, max_streams_per_shard: int
) -> list[Stage]:
    """The run's stages as stored when it was created. A run stored before plans were is
    re-planned with the configured settings; a replay's rate then comes from its
    dataset's timestamps (one stage of unknown rate when that dataset is gone)."""
    stored = RunStore(con).stored_plan(run_id)
    if stored is not None:
        return stored_stages([(s.stage_concurrency, s.spec) for s in stored])
    replay = scenario.workload.replay
    if replay is None:
        return plan_run(run_id, scenario, max_streams_per_shard)
    try:
        times = DatasetStore(con).replay_times(replay.dataset or "")
    except (LookupError, ValueError):
        return [Stage(0, 0, [])]
    return plan_run(run_id, scenario, max_streams_per_shard, replay_times=times)


def _summarise(run_id: str, name: str, state: str, stages: list[StagePublic]) -> RunPublic:
    shards = [s for stage in stages for s in stage.shards]
    planned = [s.requests_planned for s in shards]
    ttfts = [s.ttft_p50_ms for s in shards if s.ttft_p50_ms is not None]
    return RunPublic(
        id=run_id,
        name=name,
        state=state,
        requests_done=sum(s.requests_done for s in shards),
        requests_planned=None if None in planned else sum(p or 0 for p in planned),
        errors=sum(s.errors for s in shards),
        ttft_p50_ms=statistics.median(ttfts) if ttfts else None,
        stages=stages,
    )


# How a run the caller may not read is named in a queued run's ``waiting_for``.
HIDDEN_RUN = "(a run of another team)"


def queue_public(
    entry: QueuedRun, waiting: Waiting | None, readable: Callable[[str], bool] | None = None
) -> QueuePublic:
    """Why a queued run waits, as the API shows it; a run ``readable`` says the caller
    may not read is named only as another team's (its id would tell it exists)."""
    runs = waiting.waiting_for if waiting else []
    if readable is not None:
        runs = [run if readable(run) else HIDDEN_RUN for run in runs]
    return QueuePublic(
        position=waiting.position if waiting else 1,
        waiting_for=runs,
        reason=waiting.reason if waiting else "starting",
        targets=sorted(entry.needs),
    )


def queued_view(
    entry: QueuedRun, waiting: Waiting | None, readable: Callable[[str], bool] | None = None
) -> RunPublic:
    """A queued run (docs/teams.md): no shard yet, its place in the queue."""
    return RunPublic(
        id=entry.run_id,
        name=entry.scenario.name,
        state=RunState.QUEUED,
        created_at=entry.queued_at,
        requests_done=0,
        requests_planned=None,
        errors=0,
        ttft_p50_ms=None,
        stages=[],
        queue=queue_public(entry, waiting, readable),
    )
