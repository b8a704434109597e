"""Scenarios submitted over REST, kept in DuckDB beside the runs that use them."""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass
from typing import Any

import duckdb
import orjson

from analytics.sql.results import first_row
from api.rest.errors import UnknownScenarioError
from scenarios.model import Scenario

_DDL = """
CREATE TABLE IF NOT EXISTS api_scenarios (
    scenario_id  VARCHAR PRIMARY KEY,
    name         VARCHAR NOT NULL,
    scenario     JSON NOT NULL,     -- validated; API keys appear only as variable names
    created_at   TIMESTAMPTZ NOT NULL
)
"""


@dataclass(frozen=True)
class StoredScenario:
    """A scenario as stored."""

    scenario_id: str
    name: str
    created_at: dt.datetime
    scenario: dict[str, Any]


class ScenarioStore:
    """Create, list and read stored scenarios."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        con.execute(_DDL)

    def add(self, scenario: Scenario) -> StoredScenario:
        """Store a validated scenario; returns it with its new id."""
        scenario_id = "sc-" + uuid.uuid4().hex[:12]
        now = dt.datetime.now(dt.UTC)
        self.con.execute(
            "INSERT INTO api_scenarios VALUES (?, ?, ?, ?)",
            [scenario_id, scenario.name, scenario.model_dump_json(), now],
        )
        return StoredScenario(scenario_id, scenario.name, now, scenario.model_dump(mode="json"))

    def get(self, scenario_id: str) -> StoredScenario:
        """The stored scenario ``scenario_id`` (UnknownScenarioError if absent)."""
        return stored_scenario(self.con, scenario_id)

    def delete(self, scenario_id: str) -> None:
        """Remove a stored scenario (UnknownScenarioError if absent); its runs keep their
        own copy of it."""
        self.get(scenario_id)
        self.con.execute("DELETE FROM api_scenarios WHERE scenario_id = ?", [scenario_id])

    def list(self) -> list[StoredScenario]:
        """All stored scenarios, newest first."""
        rows = self.con.execute(
            "SELECT scenario_id, name, created_at, scenario FROM api_scenarios "
            "ORDER BY created_at DESC"
        ).fetchall()
        return [StoredScenario(r[0], r[1], r[2], orjson.loads(r[3])) for r in rows]


def stored_scenario(con: duckdb.DuckDBPyConnection, scenario_id: str) -> StoredScenario:
    """The stored scenario ``scenario_id`` read on ``con`` (a cursor of a heavy-work
    thread, or the store's own connection); UnknownScenarioError if absent."""
    row = first_row(
        con.execute(
            "SELECT scenario_id, name, created_at, scenario FROM api_scenarios "
            "WHERE scenario_id = ?",
            [scenario_id],
        )
    )
    if row is None:
        raise UnknownScenarioError(scenario_id)
    return StoredScenario(row[0], row[1], row[2], orjson.loads(row[3]))


def scenario_headers(
    con: duckdb.DuckDBPyConnection, where: tuple[str, list[object]] = ("TRUE", [])
) -> list[tuple[str, str, dt.datetime]]:
    """(id, name, created_at) of every stored scenario (of those ``where``, a trusted SQL
    condition and its parameters, holds for), newest first, without reading the
    scenarios themselves (each up to the body cap)."""
    condition, params = where
    rows = con.execute(
        "SELECT scenario_id, name, created_at FROM api_scenarios "  # noqa: S608
        f"WHERE {condition} ORDER BY created_at DESC",
        params,
    ).fetchall()
    return [(str(r[0]), str(r[1]), r[2]) for r in rows]
