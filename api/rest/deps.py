"""FastAPI dependencies as ``Annotated`` aliases: settings, control plane, DuckDB, Redis."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

import duckdb
from fastapi import Depends, Request
from redis.asyncio import Redis

from api.control.plane import ControlPlane
from api.rest.auth import require_token
from api.rest.scenario_store import ScenarioStore
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


def _scenarios(request: Request) -> ScenarioStore:
    store: ScenarioStore = request.app.state.scenarios
    return store


SettingsDep = Annotated[Settings, Depends(_settings)]
PlaneDep = Annotated[ControlPlane, Depends(_plane)]
RedisDep = Annotated[Redis, Depends(_redis)]
WriterDep = Annotated[duckdb.DuckDBPyConnection, Depends(_writer)]
CursorDep = Annotated[duckdb.DuckDBPyConnection, Depends(_cursor)]
ScenarioStoreDep = Annotated[ScenarioStore, Depends(_scenarios)]
Authenticated = Depends(require_token)
