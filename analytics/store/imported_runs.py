"""Storing another tool's run (``analytics.imports``) as a tokenbench run, exactly once.

An imported run is written where a measured run is: a ``runs`` row (its scenario is the
import's description, which no version reads as a scenario), a ``providers`` and a
``regions`` row, one finished shard per stage, and one ``request_records`` row per
request the file had; besides, its provenance (``run_imports``), the tool's
definition notes (``import_notes``) and the figures the tool printed
(``import_summaries``). So every view, report, comparison, trend and SQL query reads
it as it reads any run, and a figure the file lacks is NULL there.

The run id is ``imp-`` and 20 hex digits of the SHA-256 of the files' sorted SHA-256s:
the same files give the same run, and storing it again adds nothing. Everything is
written in one transaction: a run is stored whole or not at all.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import duckdb
import pyarrow as pa

from analytics.imports.model import ImportedRequest, ImportedRun, ImportedStage
from analytics.sql.results import first_row
from analytics.store.runs import transaction
from scenarios.wire.records import REQUEST_RECORD_SCHEMA

__all__ = [
    "IMPORT_REGION",
    "LOCAL_TEAM",
    "StoredImport",
    "import_run_id",
    "set_sha256",
    "store_imported",
]

# The team of a local import (``tokenbench import --db``): objects without an owner
# belong to team ``default`` (docs/teams.md).
LOCAL_TEAM: Final = "default"
# The region of an imported run's rows: the other tool's machine, wherever it was.
IMPORT_REGION: Final = "imported"
_NS_PER_MS: Final = 1_000_000


@dataclass(frozen=True, slots=True)
class StoredImport:
    """What storing an imported run did: ``added`` false when it was already stored."""

    run_id: str
    tool: str
    added: bool
    stages: int
    requests: int
    per_request: bool

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form (the CLI's --format json, the REST answer)."""
        return {
            "run_id": self.run_id,
            "tool": self.tool,
            "added": self.added,
            "stages": self.stages,
            "requests": self.requests,
            "per_request": self.per_request,
        }


def set_sha256(run: ImportedRun) -> str:
    """The SHA-256 of the sorted SHA-256s of the files the run was read from."""
    digests = sorted(f.sha256 for f in run.files)
    return hashlib.sha256("\n".join(digests).encode()).hexdigest()


def import_run_id(run: ImportedRun, team: str = LOCAL_TEAM) -> str:
    """The run id ``team``'s import of ``run`` is stored under: the same files imported
    by the same team, the same id. The team is part of it so that an import never tells
    whether another team imported the same files (its run is not this team's)."""
    return "imp-" + hashlib.sha256(f"{team}\n{set_sha256(run)}".encode()).hexdigest()[:20]


def _ns(ms: float | None) -> int | None:
    return None if ms is None else round(ms * _NS_PER_MS)


def _stamp(ns: int | None) -> dt.datetime | None:
    if ns is None:
        return None
    return dt.datetime.fromtimestamp(ns // 1_000_000_000, dt.UTC) + dt.timedelta(
        microseconds=(ns % 1_000_000_000) // 1000
    )


def _record(
    run_id: str,
    provider: str,
    run: ImportedRun,
    stage: ImportedStage,
    seq: int,
    request: ImportedRequest,
) -> dict[str, Any]:
    """One ``request_records`` row of an imported request: what the file says, NULL
    for the rest (never a tokenbench default standing in for an unknown)."""
    ttft, e2e = _ns(request.ttft_ms), _ns(request.e2e_ms)
    itl = None if request.itl_ms is None else [round(g * _NS_PER_MS) for g in request.itl_ms]
    sent = request.sent_at_ns
    if sent is None and request.start_offset_ms is not None and stage.started_at_ns is not None:
        sent = stage.started_at_ns + round(request.start_offset_ms * _NS_PER_MS)
    events = 0 if ttft is None else 1 + len(itl or ())
    return {
        "run_id": run_id,
        "stage": stage.index,
        "shard_id": _shard_id(stage),
        "attempt": 0,
        "seq": seq,
        "provider": provider,
        "model": run.model,
        "region": IMPORT_REGION,
        "worker": run.tool,
        "load_kind": stage.load_kind,
        "concurrency": stage.concurrency or 0,
        # Planned lengths: an imported request's are unknown; what it sent and got is
        # in prompt_tokens and completion_tokens.
        "planned_prompt_tokens": request.prompt_tokens or 0,
        "planned_output_tokens": request.output_tokens or 0,
        "sent_at": _stamp(sent),
        "first_token_at": _stamp(None if sent is None or ttft is None else sent + ttft),
        "end_at": _stamp(None if sent is None or e2e is None else sent + e2e),
        "ttft_ns": ttft,
        "e2e_ns": e2e,
        "last_token_ns": None if ttft is None or itl is None else ttft + sum(itl),
        "itl_ns": itl,
        "token_events": events,
        "prompt_tokens": request.prompt_tokens,
        "completion_tokens": request.output_tokens,
        "token_count_source": None if request.output_tokens is None else run.tool,
        "prompt_count_source": None if request.prompt_tokens is None else run.tool,
        "status": "ok" if request.ok else "error",
        "error_class": None if request.ok else "imported",
        "error_message": None if request.ok else (request.error or "failed (no message)"),
        "client_request_id": request.request_id,
        "connection_new": request.connection_new,
    }


def _shard_id(stage: ImportedStage) -> str:
    return f"s{stage.index}-{IMPORT_REGION}"


def _spec(stage: ImportedStage) -> str:
    """An imported shard's stored spec: what the run list reads of a stored plan (the
    level's rate; the level is ``stage_concurrency``). It is never dispatched, so it is
    no ShardSpec, and no version reads it as one (the run is stored finished)."""
    rate = None if stage.rate_per_s is None else {"rps": stage.rate_per_s}
    imported = {"label": stage.label, "load_kind": stage.load_kind}
    return json.dumps({"imported": imported, "rate": rate})


def _records(run_id: str, provider: str, run: ImportedRun) -> pa.Table:
    rows = [
        _record(run_id, provider, run, stage, seq, request)
        for stage in run.stages
        for seq, request in enumerate(stage.requests)
    ]
    return pa.Table.from_pylist(rows, schema=REQUEST_RECORD_SCHEMA)


def _description(run: ImportedRun, provider: str) -> str:
    """The ``runs.scenario`` of an imported run: what was imported, in one object."""
    return json.dumps(
        {
            "imported": {
                "tool": run.tool,
                "tool_version": run.tool_version,
                "format": run.format,
                "model": run.model,
                "target": run.target,
                "provider": provider,
                "stages": [
                    {
                        "label": s.label,
                        "load_kind": s.load_kind,
                        "concurrency": s.concurrency,
                        "rate_per_s": s.rate_per_s,
                    }
                    for s in run.stages
                ],
            }
        }
    )


def _name(run: ImportedRun) -> str:
    version = f" {run.tool_version}" if run.tool_version else ""
    first = run.files[0].name if run.files else run.format
    return f"{run.tool}{version}: {first}"[:200]


def _write(
    con: duckdb.DuckDBPyConnection, run_id: str, run: ImportedRun, provider: str, by: str
) -> None:
    created = run.started_at or dt.datetime.now(dt.UTC)
    con.execute(
        "INSERT INTO runs (run_id, name, scenario, created_at, finished_at, state) "
        "VALUES (?, ?, ?, ?, ?, 'finished')",
        [run_id, _name(run), _description(run, provider), created, created],
    )
    con.execute(
        "INSERT INTO providers (run_id, provider, kind, model) VALUES (?, ?, 'imported', ?)",
        [run_id, provider, run.model],
    )
    con.execute("INSERT INTO regions VALUES (?, ?)", [run_id, IMPORT_REGION])
    if not run.stages:  # analytics.imports.tools refuses such a run before it gets here
        raise ValueError("an imported run without a stage")
    con.executemany(
        "INSERT INTO shards (run_id, shard_id, stage, provider, region, concurrency, "
        "planned_requests, state, accepted_attempt, records, dispatches, stage_concurrency, "
        "plan_position, spec) VALUES (?, ?, ?, ?, ?, ?, ?, 'finished', 0, ?, 0, ?, ?, ?)",
        [
            [
                run_id, _shard_id(s), s.index, provider, IMPORT_REGION, s.concurrency or 0,
                len(s.requests), len(s.requests), s.concurrency or 0, position, _spec(s),
            ]
            for position, s in enumerate(run.stages)
        ],
    )  # fmt: skip
    records = _records(run_id, provider, run)
    if records.num_rows:
        con.register("imported_records", records)
        try:
            con.execute("INSERT INTO request_records BY NAME SELECT * FROM imported_records")
        finally:
            con.unregister("imported_records")
    con.execute(
        "INSERT INTO run_imports VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            run_id,
            run.tool,
            run.tool_version,
            run.format,
            run.per_request,
            run.model,
            run.target,
            run.started_at,
            json.dumps([f.model_dump() for f in run.files]),
            set_sha256(run),
            dt.datetime.now(dt.UTC),
            by,
        ],
    )
    notes = [[run_id, n.figure, n.note] for n in run.notes]
    if notes:  # DuckDB refuses executemany of no rows
        con.executemany("INSERT INTO import_notes VALUES (?, ?, ?)", notes)
    figures = {
        (s.index, f.figure, f.stat): [run_id, s.index, provider, f.figure, f.stat, f.value, f.unit]
        for s in run.stages
        for f in s.summary
    }
    if figures:
        con.executemany(
            "INSERT INTO import_summaries VALUES (?, ?, ?, ?, ?, ?, ?)", list(figures.values())
        )


def store_imported(
    con: duckdb.DuckDBPyConnection,
    run: ImportedRun,
    provider: str,
    imported_by: str,
    team: str = LOCAL_TEAM,
    also: Callable[[duckdb.DuckDBPyConnection, str], None] | None = None,
) -> StoredImport:
    """Store ``team``'s import of ``run`` as provider ``provider`` (all or nothing, with
    what ``also(con, run_id)`` writes in the same transaction, e.g. its owner); nothing
    is written when the run is already stored."""
    run_id = import_run_id(run, team)
    requests = sum(len(s.requests) for s in run.stages)
    with transaction(con):
        stored = first_row(con.execute("SELECT 1 FROM runs WHERE run_id = ?", [run_id]))
        if stored is None:
            _write(con, run_id, run, provider, imported_by)
            if also is not None:
                also(con, run_id)
    return StoredImport(
        run_id, run.tool, stored is None, len(run.stages), requests, run.per_request
    )
