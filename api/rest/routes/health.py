"""Health (no auth), readiness (no auth) and Prometheus metrics (auth)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from redis.exceptions import RedisError

from analytics.sql.results import first_row
from api.control.dispatch import live_worker_count
from api.control.plane import ControlPlane
from api.rest.deps import Authenticated, PlaneDep, RedisDep, SettingsDep, WriterDep
from scenarios.wire.contract import IN_FLIGHT, events_stream, records_stream, region_queue

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(redis: RedisDep, con: WriterDep, settings: SettingsDep) -> JSONResponse:
    """Redis reachable, DuckDB writable, live workers per known region."""
    checks: dict[str, Any] = {}
    try:
        checks["redis"] = bool(await redis.ping())
    except RedisError as exc:
        checks["redis"] = f"unreachable: {type(exc).__name__}"
    try:
        con.execute("CREATE OR REPLACE TEMP TABLE readyz_probe AS SELECT 1 AS ok")
        checks["duckdb"] = True
    except Exception as exc:
        checks["duckdb"] = f"not writable: {type(exc).__name__}"
    workers: dict[str, int] = {}
    if checks["redis"] is True:
        regions = set(settings.regions)
        async for key in redis.scan_iter(match="tokenbench:worker:*", count=200):
            regions.add((key.decode() if isinstance(key, bytes) else key).split(":")[2])
        for region in sorted(regions):
            workers[region] = await live_worker_count(redis, region)
    checks["workers"] = workers
    ready = checks["redis"] is True and checks["duckdb"] is True
    return JSONResponse({"ready": ready, **checks}, status_code=200 if ready else 503)


@router.get("/metrics", dependencies=[Authenticated], response_class=Response)
async def metrics(plane: PlaneDep, con: WriterDep) -> Response:
    """Prometheus text: runs by state, shards in flight and tasks queued per region,
    stream backlog, ingest lag, requests recorded, unexpected control-loop errors."""
    samples = await collect(plane, con)
    registry = CollectorRegistry()
    registry.register(_Snapshot(samples))
    return Response(generate_latest(registry), media_type="text/plain; version=0.0.4")


async def _queue_depths(plane: ControlPlane, in_flight: dict[str, int]) -> dict[str, int]:
    """Tasks waiting in each region's queue: regions with a live worker, or with a shard
    of a run going (a region without a worker is where tasks pile up)."""
    regions = set(in_flight)
    for coordinator in plane.runs.values():
        regions.update(coordinator.scenario.regions)
    try:
        async for key in plane.redis.scan_iter(match="tokenbench:worker:*", count=200):
            regions.add((key.decode() if isinstance(key, bytes) else key).split(":")[2])
        return {
            region: int(await plane.redis.llen(region_queue(region))) for region in sorted(regions)
        }
    except RedisError:
        return {}


async def collect(plane: ControlPlane, con: Any) -> list[Metric]:
    """The metric families of one scrape (/metrics; the web console's health page)."""
    runs = GaugeMetricFamily("tokenbench_runs", "Runs by state", labels=["state"])
    for state, count in con.execute("SELECT state, count(*) FROM runs GROUP BY state").fetchall():
        runs.add_metric([state], count)
    in_flight = GaugeMetricFamily(
        "tokenbench_shards_in_flight", "Shards dispatched or running", labels=["region"]
    )
    counts: dict[str, int] = {}
    for coordinator in plane.runs.values():
        for shard in coordinator.shards.values():
            if shard.state in IN_FLIGHT:
                counts[shard.spec.region] = counts.get(shard.spec.region, 0) + 1
    for region, count in sorted(counts.items()):
        in_flight.add_metric([region], count)
    backlog = GaugeMetricFamily(
        "tokenbench_stream_backlog", "Stream entries not yet processed", labels=["stream"]
    )
    pending = GaugeMetricFamily(
        "tokenbench_ingest_pending", "Entries read but not yet acknowledged", labels=["stream"]
    )
    totals = {"events": [0, 0], "records": [0, 0]}
    for run_id in plane.runs:
        for kind, stream in (
            ("events", events_stream(run_id)),
            ("records", records_stream(run_id)),
        ):
            try:
                groups = await plane.redis.xinfo_groups(stream)
            except RedisError:
                continue
            for group in groups:
                totals[kind][0] += int(group.get("lag") or 0)
                totals[kind][1] += int(group.get("pending") or 0)
    for kind, (lag, pend) in totals.items():
        backlog.add_metric([kind], lag)
        pending.add_metric([kind], pend)
    queued = GaugeMetricFamily(
        "tokenbench_region_queue_depth",
        "Shard tasks waiting in a region's queue for a worker",
        labels=["region"],
    )
    for region, depth in (await _queue_depths(plane, counts)).items():
        queued.add_metric([region], depth)
    recorded = GaugeMetricFamily("tokenbench_requests_recorded", "Request records stored")
    row = first_row(con.execute("SELECT count(*) FROM request_records"))
    recorded.add_metric([], row[0] if row else 0)
    step_errors = CounterMetricFamily(
        "tokenbench_control_step_errors",
        "Unexpected errors a control-loop step raised (logged; the loop went on)",
        value=plane.step_errors,
    )
    return [runs, in_flight, queued, backlog, pending, recorded, step_errors]


class _Snapshot:
    """A collector returning metric families computed for one scrape."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> list[Metric]:
        return self.families
