"""The REST control plane: ``create_app()`` wires settings, Redis, DuckDB and the loop.

The application owns one DuckDB writer connection and one :class:`ControlPlane`, whose
loop runs as a background task for the application's lifetime; routes read through
cursors of that connection.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import duckdb
from celery import Celery
from fastapi import FastAPI
from fastapi_offline import FastAPIOffline
from redis.asyncio import Redis

from analytics.store.db import connect
from api import console
from api.access.caller import Caller, Role
from api.access.ownership import Kind, Visibility, owner_of, set_default_visibility
from api.access.tokens import TokenRegistry
from api.control.plane import ControlPlane
from api.control.queue import RunQueue
from api.rest.body_limit import BodyLimitMiddleware
from api.rest.errors import install_error_handlers
from api.rest.offload import HeavyWork
from api.rest.rate_limit import RateLimiter
from api.rest.routes import answers as answers_routes
from api.rest.routes import audit as audit_routes
from api.rest.routes import datasets, health, runs, scenarios, schedules, shadow, sql, trends
from api.rest.routes import imports as imports_routes
from api.rest.routes import otlp as otlp_routes
from api.rest.routes import spend as spend_routes
from api.rest.routes import teams as teams_routes
from api.rest.routes import tokens as tokens_routes
from api.rest.run_start import RunStarter
from api.rest.scenario_store import ScenarioStore
from api.schedules.service import ScheduleService
from api.schemas import RunCreate
from scenarios.limits import MAX_OTLP_BODY_BYTES
from scenarios.settings import Settings, env_name
from scenarios.wire.contract import REDIS_CLIENT_OPTIONS

DOCS_ASSETS_URL = "/docs-assets"


def _access(settings: Settings, con: duckdb.DuckDBPyConnection) -> TokenRegistry:
    """The token registry (bootstrap tokens: TOKENBENCH__API__TOKENS), and the read rule
    of teams without a setting of their own (TOKENBENCH__TEAMS__VISIBILITY)."""
    set_default_visibility(Visibility(settings.teams.visibility))
    bootstrap = [token.get_secret_value() for token in settings.api.tokens]
    return TokenRegistry(con, bootstrap)


def _schedule_service(
    con: duckdb.DuckDBPyConnection, settings: Settings, starter: RunStarter, queue: RunQueue
) -> ScheduleService:
    """Schedules fire runs through the same starter as POST /v1/runs (docs/tracking.md);
    a run of theirs that is queued still counts as running for the next fire."""

    async def fire_run(body: RunCreate, schedule_id: str) -> str:
        # A schedule's run is its owner's: the team and token that created it.
        owner = owner_of(con, Kind.SCHEDULE, schedule_id)
        caller = Caller(owner.token_id or "schedule", owner.team, Role.SUBMITTER)
        return (await starter.start(body, caller, schedule_id)).run_id

    return ScheduleService(con, settings, fire_run, queue.active, queue.note)


def create_app(settings: Settings, celery: Celery) -> FastAPI:
    """The FastAPI application of the control plane. ``celery`` is the broker client it
    dispatches shards through (by task name; ``tokenbench serve`` passes the workers'
    configured app), so the REST app imports nothing of the worker runtime."""
    if settings.redis.url is None:
        raise RuntimeError(f"the control plane needs {env_name('redis.url')}")
    redis_url = settings.redis.url

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        celery.conf.broker_url = redis_url
        con = connect(Path(settings.duckdb.path), memory_limit=settings.duckdb.memory_limit)
        redis = Redis.from_url(redis_url, **REDIS_CLIENT_OPTIONS)
        plane = ControlPlane(redis, con, celery, settings.control, teams=settings.teams)
        await plane.start()
        # Queued runs (endpoint leases, team quotas): still queued after a restart.
        queue = plane.queue = RunQueue(plane, con, settings.teams)
        queue.load()
        app.state.settings = settings
        app.state.con = con
        app.state.redis = redis
        app.state.plane = plane
        app.state.tokens = _access(settings, con)
        # Each token's request rate (api/rest/rate_limit.py), checked after authentication.
        app.state.rate_limiter = RateLimiter.of(settings.teams, len(settings.api.tokens))
        # One limiter for every heavy route (api/rest/offload.py, docs/security.md Bounds).
        heavy = HeavyWork(settings.api.heavy_requests, settings.api.heavy_wait_s)
        app.state.heavy = heavy
        app.state.scenarios = ScenarioStore(con)
        starter = RunStarter(plane, redis, app.state.scenarios, settings, con, heavy)
        app.state.starter = starter

        # A queued run counts as still running for its schedule's next fire.
        schedule_service = _schedule_service(con, settings, starter, queue)
        app.state.schedules = schedule_service
        stop = asyncio.Event()
        loop_task = asyncio.create_task(plane.serve_forever(stop))
        await schedule_service.start()
        try:
            yield
        finally:
            await schedule_service.stop()
            stop.set()
            await loop_task
            await redis.aclose()
            await asyncio.to_thread(heavy.close)  # its threads use cursors of ``con``
            con.close()

    # /docs and /redoc with their Swagger UI and ReDoc assets served by the app itself
    # (from the fastapi-offline package), not from a CDN: they work without internet.
    app = FastAPIOffline(
        title="tokenbench control plane",
        version="0.1.0",
        description="Submit benchmark scenarios, follow runs, fetch reports and records.",
        lifespan=lifespan,
        static_url=DOCS_ASSETS_URL,
        # Swagger UI would send the schema's URL to its public validator otherwise.
        swagger_ui_parameters={"validatorUrl": None},
    )
    app.add_middleware(
        BodyLimitMiddleware,
        max_bytes=settings.api.max_body_bytes,
        # Dataset uploads are whole JSONL files: their own, larger cap.
        route_max_bytes={
            ("POST", "/v1/datasets"): settings.api.max_dataset_bytes,
            # Imported result files (docs/import.md): uploaded files too.
            ("POST", "/v1/imports"): settings.api.max_dataset_bytes,
            # OTLP exports (docs/traces.md): a bound of their own (scenarios/limits.py).
            ("POST", otlp_routes.TRACES_PATH): MAX_OTLP_BODY_BYTES,
        },
        setting=env_name("api.max_body_bytes"),
        route_settings={
            ("POST", "/v1/datasets"): env_name("api.max_dataset_bytes"),
            ("POST", "/v1/imports"): env_name("api.max_dataset_bytes"),
            ("POST", otlp_routes.TRACES_PATH): "MAX_OTLP_BODY_BYTES, fixed",
        },
    )
    install_error_handlers(app)
    for routes in (
        health,
        scenarios,
        runs,
        sql,
        shadow,
        datasets,
        schedules,
        trends,
        tokens_routes,
        teams_routes,
        audit_routes,
        spend_routes,
        answers_routes,
        otlp_routes,
        imports_routes,
    ):
        app.include_router(routes.router)
    # The web console at / (docs/console.md): the same routes' functions, in pages.
    console.install(app)
    return app
