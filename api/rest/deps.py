"""FastAPI dependencies as ``Annotated`` aliases: settings, control plane, DuckDB, Redis."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

import duckdb
from fastapi import Depends, Request
from redis.asyncio import Redis

from api.access.caller import Caller, Role
from api.access.tokens import TokenRegistry
from api.control.plane import ControlPlane
from api.rest.auth import require_caller, require_role
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


def _tokens(request: Request) -> TokenRegistry:
    registry: TokenRegistry = request.app.state.tokens
    return registry


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
TokensDep = Annotated[TokenRegistry, Depends(_tokens)]
Authenticated = Depends(require_caller)
# The caller of a route (any role), and of routes that need a role.
CallerDep = Annotated[Caller, Depends(require_caller)]
SubmitterDep = Annotated[Caller, Depends(require_role(Role.SUBMITTER))]
AdminDep = Annotated[Caller, Depends(require_role(Role.ADMIN))]
