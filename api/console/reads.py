"""The console's reads: the REST routes' own functions called with the session's
caller (same checks: check_read, visible_sql, the heavy-work limiter), their JSON
answers decoded for the templates. Nothing here queries what a REST route already does.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import duckdb
import orjson
from fastapi import Request, Response
from redis.asyncio import Redis

from analytics.sql.results import first_row
from api.access.caller import Caller
from api.access.ownership import Kind, check_read, owner_of
from api.access.tokens import TokenRegistry
from api.control.plane import ControlPlane
from api.rest.offload import HeavyWork
from api.rest.routes import runs as rest_runs
from api.schedules.service import ScheduleService
from scenarios.settings import Settings

ACTIVE = ("running", "queued", "deciding")
LISTED_RUNS = 100


@dataclass(frozen=True, slots=True)
class App:
    """What the REST routes take as dependencies, from the app's state."""

    settings: Settings
    plane: ControlPlane
    writer: duckdb.DuckDBPyConnection
    heavy: HeavyWork
    redis: Redis
    schedules: ScheduleService
    tokens: TokenRegistry

    @classmethod
    def of(cls, request: Request) -> App:
        """The app's parts (set by its lifespan)."""
        state = request.app.state
        return cls(
            state.settings,
            state.plane,
            state.con,
            state.heavy,
            state.redis,
            state.schedules,
            state.tokens,
        )


def decoded(response: Response) -> Any:
    """A JSON answer of a route, decoded."""
    return orjson.loads(bytes(response.body))


async def run_list(app: App, caller: Caller, q: str = "", state: str = "") -> list[dict[str, Any]]:
    """GET /v1/runs as ``caller``, each with its team, filtered by a search text (id or
    scenario name) and a state."""
    answer = await rest_runs.list_runs(app.writer, app.heavy, app.settings, caller, LISTED_RUNS)
    listed: list[dict[str, Any]] = decoded(answer)
    needle = q.strip().lower()
    out = []
    for run in listed:
        if state and run["state"] != state:
            continue
        if needle and needle not in run["id"].lower() and needle not in run["name"].lower():
            continue
        _describe(app, run, caller)
        out.append(run)
    return out


def _describe(app: App, run: dict[str, Any], caller: Caller) -> None:
    """Add what the list shows beside the run's view: its team and who started it (the
    token's name, else its id), its providers and regions, how long it ran, and what it
    spent on token-priced providers (its team's and admins' to see, as GET /v1/spend)."""
    owner = owner_of(app.writer, Kind.RUN, run["id"])
    run["spend_usd"] = None
    if caller.is_admin or owner.team == caller.team:
        spent = first_row(
            app.writer.execute("SELECT sum(usd) FROM spend_ledger WHERE run_id = ?", [run["id"]])
        )
        run["spend_usd"] = None if spent is None or spent[0] is None else float(spent[0])
    record = app.tokens.get(owner.token_id) if owner.token_id else None
    run["team"] = owner.team
    run["who"] = (record.name if record is not None else None) or owner.token_id or ""
    shards = [shard for stage in run.get("stages", []) for shard in stage["shards"]]
    run["providers"] = sorted({shard["provider"] for shard in shards})
    run["regions"] = sorted({shard["region"] for shard in shards})
    run["duration_s"] = None
    if run.get("created_at") and run.get("finished_at"):
        began = dt.datetime.fromisoformat(run["created_at"])
        ended = dt.datetime.fromisoformat(run["finished_at"])
        run["duration_s"] = max(0.0, (ended - began).total_seconds())


async def run_view(app: App, caller: Caller, run_id: str) -> dict[str, Any]:
    """GET /v1/runs/{id} as ``caller`` (404 when it may not read it)."""
    answer = await rest_runs.get_run(run_id, app.plane, app.writer, app.heavy, app.settings, caller)
    view: dict[str, Any] = decoded(answer)
    _describe(app, view, caller)
    return view


def progress_rows(view: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per stage, provider and region: requests done and planned, errors, and
    the median of its shards' TTFT p50 (a level split into parts has several shards)."""
    rows: dict[tuple[int, str, str], dict[str, Any]] = {}
    for stage in view.get("stages", []):
        for shard in stage["shards"]:
            key = (stage["index"], shard["provider"], shard["region"])
            row = rows.setdefault(
                key,
                {
                    "stage": key[0], "provider": key[1], "region": key[2], "done": 0,
                    "planned": 0, "errors": 0, "ttfts": [], "states": {},
                },
            )  # fmt: skip
            row["states"][shard["state"]] = row["states"].get(shard["state"], 0) + 1
            row["done"] += shard["requests_done"]
            row["planned"] += shard["requests_planned"] or 0
            row["errors"] += shard["errors"]
            if shard["ttft_p50_ms"] is not None:
                row["ttfts"].append(shard["ttft_p50_ms"])
    for row in rows.values():
        # One word when its shards agree, else each state with its count ("finished 2,
        # cancelled 1"): a cancelled level must not read as finished.
        states = row.pop("states")
        row["state"] = (
            next(iter(states))
            if len(states) == 1
            else ", ".join(f"{state} {count}" for state, count in sorted(states.items()))
        )
        ttfts = sorted(row.pop("ttfts"))
        row["ttft_p50_ms"] = ttfts[len(ttfts) // 2] if ttfts else None
    return list(rows.values())


def submitted_scenario(app: App, caller: Caller, run_id: str) -> str:
    """The run's scenario as stored when it was submitted (validated, keys as variable
    names only), pretty-printed; 404 when the caller may not read the run."""
    check_read(app.writer, caller, Kind.RUN, run_id)
    row = first_row(app.writer.execute("SELECT scenario FROM runs WHERE run_id = ?", [run_id]))
    if row is None:
        return ""
    return orjson.dumps(orjson.loads(row[0]), option=orjson.OPT_INDENT_2).decode()


def _sections(
    cursor: duckdb.DuckDBPyConnection,
    run_id: str,
    compare: str | None,
    providers: str | None,
    caller: Caller,
) -> tuple[list[tuple[str, str]], dict[str, Any] | None]:
    # The HTML report's own section renderer (escaping every value), without plotly's
    # inline scripts, which the console's CSP forbids: the charts are in the download.
    from analytics.render.html_report import sections_html  # noqa: PLC0415

    report = rest_runs.run_report(cursor, run_id, compare, providers, caller)
    return sections_html(report), report.comparison


async def report_sections(
    app: App,
    caller: Caller,
    run_id: str,
    compare: str | None = None,
    providers: str | None = None,
) -> tuple[list[tuple[str, str]], dict[str, Any] | None]:
    """The run's report sections as ``(key, html)`` (and its comparison to the run
    ``compare`` or between two of its ``providers``, ``A,B``), built as GET
    /v1/runs/{id}/report builds them: both runs checked readable first."""
    check_read(app.writer, caller, Kind.RUN, run_id)
    if compare is not None:
        check_read(app.writer, caller, Kind.RUN, compare)
    return await app.heavy.on_cursor(
        "a run's report", app.writer, _sections, run_id, compare, providers, caller
    )
