"""FastAPI dependencies as ``Annotated`` aliases: settings, control plane, DuckDB, Redis."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

import duckdb
from fastapi import Depends, Request
from redis.asyncio import Redis

from api.control.plane import ControlPlane
from api.rest.auth import require_token
from api.rest.offload import HeavyWork
from api.rest.run_start import RunStarter
from api.rest.scenario_store import ScenarioStore
from api.schedules.service import ScheduleService
from scenarios.settings import Settings


def _settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def _plane(request: Request) -> ControlPlane:
    plane: ControlPlane = request.app.state.plane
    return plane


def _redis(request: Request) -> Redis:
    redis: Redis = request.app.state.redis
    return redis


def _writer(request: Request) -> duckdb.DuckDBPyConnection:
    """The control plane's connection: for async routes, on the event-loop thread only."""
    con: duckdb.DuckDBPyConnection = request.app.state.con
    return con


def _cursor(request: Request) -> Iterator[duckdb.DuckDBPyConnection]:
    """A cursor of its own for a route running in the thread pool."""
    cursor = request.app.state.con.cursor()
    try:
        yield cursor
    finally:
        cursor.close()


def _heavy(request: Request) -> HeavyWork:
    """The shared limiter of heavy work, off the event loop (api/rest/offload.py)."""
    heavy: HeavyWork = request.app.state.heavy
    return heavy


def _scenarios(request: Request) -> ScenarioStore:
    store: ScenarioStore = request.app.state.scenarios
    return store


def _starter(request: Request) -> RunStarter:
    """Starts runs as POST /v1/runs does (a schedule's fire uses the same one)."""
    starter: RunStarter = request.app.state.starter
    return starter


def _schedules(request: Request) -> ScheduleService:
    service: ScheduleService = request.app.state.schedules
    return service


SettingsDep = Annotated[Settings, Depends(_settings)]
PlaneDep = Annotated[ControlPlane, Depends(_plane)]
RedisDep = Annotated[Redis, Depends(_redis)]
WriterDep = Annotated[duckdb.DuckDBPyConnection, Depends(_writer)]
CursorDep = Annotated[duckdb.DuckDBPyConnection, Depends(_cursor)]
HeavyDep = Annotated[HeavyWork, Depends(_heavy)]
ScenarioStoreDep = Annotated[ScenarioStore, Depends(_scenarios)]
RunStarterDep = Annotated[RunStarter, Depends(_starter)]
ScheduleServiceDep = Annotated[ScheduleService, Depends(_schedules)]
Authenticated = Depends(require_token)
