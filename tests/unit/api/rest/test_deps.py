"""api/rest/deps.py: routes get the application's own settings, control plane, Redis
client, DuckDB writer and scenario store; a thread-pool route gets a cursor of its own,
closed after the request; ``Authenticated`` guards a route."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from celery import Celery
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import SecretStr
from redis.asyncio import Redis

from analytics.sql.files import load_sql
from api.access.tokens import TokenRegistry
from api.control.plane import ControlPlane
from api.rest import deps
from api.rest.errors import install_error_handlers
from api.rest.scenario_store import ScenarioStore
from scenarios.settings import ApiSettings, ControlSettings, Settings

TOKEN = "deps-token-77"


@pytest.fixture
def app(tmp_path: Path) -> Iterator[FastAPI]:
    con = duckdb.connect(str(tmp_path / "deps.duckdb"))
    con.execute("CREATE TABLE numbers AS SELECT range AS n FROM range(3)")
    # Nothing here connects: the Redis client and broker are only held, never used.
    redis = Redis.from_url("redis://127.0.0.1:1/0")
    app = FastAPI()
    install_error_handlers(app)
    app.state.settings = Settings(api=ApiSettings(tokens=[SecretStr(TOKEN)]))
    app.state.con = con
    app.state.redis = redis
    app.state.plane = ControlPlane(
        redis, con, Celery("deps", set_as_current=False), ControlSettings()
    )
    app.state.scenarios = ScenarioStore(con)
    con.execute(load_sql("schema_v19"))  # the token table only
    app.state.tokens = TokenRegistry(con, [TOKEN])
    yield app
    con.close()


def test_each_alias_is_the_applications_own(app: FastAPI) -> None:
    @app.get("/state")
    async def state(
        settings: deps.SettingsDep,
        plane: deps.PlaneDep,
        redis: deps.RedisDep,
        writer: deps.WriterDep,
        store: deps.ScenarioStoreDep,
    ) -> dict[str, bool]:
        own = app.state
        return {
            "settings": settings is own.settings,
            "plane": plane is own.plane,
            "redis": redis is own.redis,
            "writer": writer is own.con,
            "store": store is own.scenarios,
        }

    answer = TestClient(app).get("/state").json()
    assert answer == dict.fromkeys(answer, True) and len(answer) == 5


def test_a_cursor_of_its_own_closed_after_the_request(app: FastAPI) -> None:
    seen: list[Any] = []

    @app.get("/numbers")
    def numbers(cursor: deps.CursorDep) -> list[int]:
        seen.append(cursor)
        assert cursor is not app.state.con
        return [int(row[0]) for row in cursor.execute("SELECT n FROM numbers").fetchall()]

    client = TestClient(app)
    assert client.get("/numbers").json() == [0, 1, 2]
    assert client.get("/numbers").json() == [0, 1, 2]
    assert seen[0] is not seen[1]
    for cursor in seen:  # closed: a later use fails, the writer is untouched
        with pytest.raises(duckdb.ConnectionException):
            cursor.execute("SELECT 1")
    assert app.state.con.execute("SELECT count(*) FROM numbers").fetchone() == (3,)


def test_authenticated_guards_a_route(app: FastAPI) -> None:
    @app.get("/guarded", dependencies=[deps.Authenticated])
    def guarded() -> str:
        return "in"

    client = TestClient(app)
    assert client.get("/guarded").status_code == 401
    assert client.get("/guarded", headers={"authorization": "Bearer no"}).status_code == 401
    assert client.get("/guarded", headers={"authorization": f"Bearer {TOKEN}"}).json() == "in"
