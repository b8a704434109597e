"""A stored run as llm-d benchmark reports (docs/import.md, "llm-d").

llm-d-benchmark's "benchmark report" (schema 0.2) describes one load level of one
stack: the experiment (``run``), what was measured and how it was loaded (``scenario``)
and the level's aggregate statistics (``results.request_performance.aggregate``). A
tokenbench run becomes one report per stage, provider and region, from the same rows
``tokenbench report`` prints (``stage_summary``, or the stored aggregates of a large
run: analytics/report/stored.py), so every figure is the report's own; nothing is
recomputed here. Fields tokenbench has no figure for are left out, never filled in.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass
from typing import Any, Final

import duckdb
from pydantic import ValidationError

from analytics.report.answers import with_stage_marks
from analytics.report.build import UnknownRunError, summary_rows
from analytics.report.prompt_realism import with_prompt_realism
from analytics.report.stored import (
    ExactLimits,
    group_histograms,
    stored_summary_rows,
    use_histograms,
)
from analytics.report.token_truth import with_token_truth
from analytics.sql.results import first_row
from analytics.store.bundles import tokenbench_version
from scenarios.model import Scenario
from scenarios.workload.spec import FixedLength, Workload

__all__ = ["LLMD_REPORT_VERSION", "llmd_report"]

LLMD_REPORT_VERSION: Final = "0.2"
TOOL: Final = "tokenbench"

# (llm-d latency field, stage-row metric, llm-d units). ITL and TPOT are per-token
# latencies in llm-d's schema, so they carry "ms/token".
_LATENCY: Final = (
    ("time_to_first_token", "ttft", "ms"),
    ("inter_token_latency", "itl", "ms/token"),
    ("time_per_output_token", "tpot", "ms/token"),
    ("request_latency", "e2e", "ms"),
)
# llm-d statistic key and the stage row's column suffix.
_STATS: Final = (
    ("mean", "mean_ms"),
    ("stddev", "std_ms"),
    ("p50", "p50_ms"),
    ("p90", "p90_ms"),
    ("p95", "p95_ms"),
    ("p99", "p99_ms"),
    ("p99p9", "p999_ms"),
)


def llmd_report(
    con: duckdb.DuckDBPyConnection, run_id: str, *, exact_limits: ExactLimits | None = None
) -> list[dict[str, Any]]:
    """One llm-d benchmark report (schema 0.2, as a JSON-ready dict) per stage, provider
    and region of ``run_id``, in the report's order; UnknownRunError if there is no such
    run. ``exact_limits`` as ``build_report``: above them the figures come from the
    stored histograms, as ``tokenbench report`` shows them."""
    run = first_row(
        con.execute(
            "SELECT name, created_at, finished_at, scenario FROM runs WHERE run_id = ?",
            [run_id],
        )
    )
    if run is None:
        raise UnknownRunError(run_id)
    rows = _stage_rows(con, run_id, exact_limits or ExactLimits())
    rows = with_token_truth(con, run_id, with_prompt_realism(con, run_id, rows))
    rows = with_stage_marks(con, run_id, rows)
    providers = {
        str(p["provider"]): p
        for p in _dicts(con.execute("SELECT * FROM providers WHERE run_id = ?", [run_id]))
    }
    workload = _workload(run[3])
    head = _RunHead(run_id, str(run[0]), _utc(run[1]), _utc(run[2]))
    return [_report(head, row, providers.get(str(row["provider"])), workload) for row in rows]


@dataclass(frozen=True)
class _RunHead:
    """What every report of the run shares."""

    run_id: str
    name: str
    created: dt.datetime | None
    finished: dt.datetime | None


def _stage_rows(
    con: duckdb.DuckDBPyConnection, run_id: str, limits: ExactLimits
) -> list[dict[str, Any]]:
    """The report's summary rows, exact or from the stored aggregates as ``build_report``
    chooses them."""
    if use_histograms(con, run_id, limits):
        return stored_summary_rows(con, run_id, group_histograms(con, run_id))
    return summary_rows(con, run_id)


def _dicts(cursor: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    columns = [d[0] for d in cursor.description or []]
    return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]


def _utc(value: Any) -> dt.datetime | None:
    if not isinstance(value, dt.datetime):
        return None
    return value.astimezone(dt.UTC) if value.tzinfo else value.replace(tzinfo=dt.UTC)


def _workload(scenario_json: Any) -> Workload | None:
    try:
        return Scenario.model_validate_json(str(scenario_json)).workload
    except ValidationError:
        return None  # a scenario this version cannot read: no planned lengths from it


def _iso(moment: dt.datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def _run_block(head: _RunHead, row: dict[str, Any]) -> dict[str, Any]:
    stage, provider, region = row["stage"], row["provider"], row["region"]
    time: dict[str, Any] = {}
    if head.created is not None:
        time["start"] = _iso(head.created)
    if head.finished is not None:
        time["end"] = _iso(head.finished)
        if head.created is not None:
            time["duration"] = f"PT{(head.finished - head.created).total_seconds()}S"
    block: dict[str, Any] = {
        "uid": f"{head.run_id}.s{stage}.{provider}.{region}",
        "eid": head.run_id,
        "description": (
            f"tokenbench run {head.run_id} ({head.name}): stage {stage}, provider "
            f"{provider}, region {region}"
        ),
        "keywords": [TOOL, f"stage={stage}", f"provider={provider}", f"region={region}"],
    }
    if time:
        block["time"] = time
    return block


def _stack(provider: str, info: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The measured endpoint as a ``generic`` component: llm-d's ``inference_engine``
    requires the accelerator and its parallelism, which a provider does not state."""
    info = info or {}
    # llm-d's cfg_id is a hash of the component's configuration: here, of what the run
    # stored of the provider (its settings, not the run it was in).
    settings = {k: v for k, v in info.items() if k != "run_id"}
    config = json.dumps(settings, sort_keys=True, default=str)
    standardized: dict[str, Any] = {
        "kind": "generic",
        "tool": str(info.get("kind") or "unknown"),
        "tool_version": "",  # a provider's server version is not known (llm-d: "")
    }
    if info.get("model"):
        standardized["model"] = {"name": str(info["model"])}
    return [
        {
            "metadata": {
                "schema_version": "0.0.1",
                "label": provider,
                "cfg_id": hashlib.sha256(config.encode()).hexdigest(),
            },
            "standardized": standardized,
            "native": {},
        }
    ]


def _fixed_length(workload: Workload | None, side: str) -> int | None:
    """The one planned length when every request plans the same: a length mix alone
    whose classes all fix ``side`` (prompt_tokens or output_tokens) to one value."""
    if workload is None or not workload.mix:
        return None
    if workload.dataset or workload.replay or workload.prompts or workload.sessions:
        return None
    lengths = [getattr(c, side) for c in workload.mix]
    if not all(isinstance(d, FixedLength) for d in lengths):
        return None
    values = {int(d.value) for d in lengths}
    return values.pop() if len(values) == 1 else None


def _sequence(fixed: int | None, planned_mean: Any) -> dict[str, Any] | None:
    """llm-d's SequenceLength: ``fixed`` for a fixed plan, else ``other`` (a distribution
    the schema does not name) with the mean planned length."""
    if fixed is not None:
        return {"distribution": "fixed", "value": fixed}
    if planned_mean is None:
        return None
    return {"distribution": "other", "value": float(planned_mean)}


def _load(row: dict[str, Any], workload: Workload | None) -> dict[str, Any] | None:
    """``scenario.load``; None when the input length is unknown (the schema needs it)."""
    source = "unknown"
    if workload is not None:
        sampled = workload.dataset or workload.replay or workload.prompts
        source = "sampled" if sampled else "random"  # generated prompts: random words
    prompt = _sequence(
        _fixed_length(workload, "prompt_tokens"), row.get("prompt_tokens_planned_mean")
    )
    if prompt is None:
        return None
    standardized: dict[str, Any] = {
        "tool": TOOL,
        "tool_version": tokenbench_version(),
        "source": source,
        "stage": int(row["stage"]),
        "input_seq_len": prompt,
    }
    output = _sequence(
        _fixed_length(workload, "output_tokens"), row.get("output_tokens_planned_mean")
    )
    if output is not None:
        standardized["output_seq_len"] = output
    kind, rate, concurrency = row.get("load_kind"), row.get("offered_rps"), row.get("concurrency")
    if kind == "closed" and concurrency:
        standardized["concurrency"] = int(concurrency)  # virtual users
    elif kind == "open" and rate:
        standardized["rate_qps"] = float(rate)
        if concurrency:
            # The open loop's in-flight cap; alone it would read as a closed loop.
            standardized["concurrency"] = int(concurrency)
    return {
        "metadata": {"schema_version": "0.0.1"},
        "standardized": standardized,
        "native": {},
    }


def _statistics(row: dict[str, Any], metric: str, units: str) -> dict[str, Any] | None:
    if row.get(f"{metric}_mean_ms") is None:
        return None  # no successful request: the schema's mean cannot be given
    stats: dict[str, Any] = {"units": units}
    for key, suffix in _STATS:
        value = row.get(f"{metric}_{suffix}")
        if value is not None:
            stats[key] = float(value)
    return stats


def _rate(value: Any, units: str) -> dict[str, Any] | None:
    return None if value is None else {"units": units, "mean": float(value)}


def _aggregate(row: dict[str, Any]) -> dict[str, Any]:
    ok = int(row["ok"] or 0)
    requests: dict[str, Any] = {"total": int(row["requests"]), "failures": int(row["errors"])}
    # Means over the successful requests, from the row's sums over the same requests.
    for key, total in (("input_length", "input_tokens"), ("output_length", "output_tokens")):
        if ok and row.get(total) is not None:
            requests[key] = {"units": "count", "mean": int(row[total]) / ok}
    latency = {
        key: stats
        for key, metric, units in _LATENCY
        if (stats := _statistics(row, metric, units)) is not None
    }
    in_rate, out_rate = row.get("input_tok_s"), row.get("output_tok_s")
    total_rate = None if in_rate is None or out_rate is None else in_rate + out_rate
    rates = {
        "input_token_rate": _rate(in_rate, "tokens/s"),
        "output_token_rate": _rate(out_rate, "tokens/s"),
        "total_token_rate": _rate(total_rate, "tokens/s"),
        "request_rate": _rate(row.get("request_rate"), "queries/s"),
    }
    aggregate: dict[str, Any] = {"requests": requests}
    if latency:
        aggregate["latency"] = latency
    throughput = {key: value for key, value in rates.items() if value is not None}
    if throughput:
        aggregate["throughput"] = throughput
    return aggregate


def _report(
    head: _RunHead,
    row: dict[str, Any],
    provider: dict[str, Any] | None,
    workload: Workload | None,
) -> dict[str, Any]:
    scenario: dict[str, Any] = {"stack": _stack(str(row["provider"]), provider)}
    load = _load(row, workload)
    if load is not None:
        scenario["load"] = load
    return {
        "version": LLMD_REPORT_VERSION,
        "run": _run_block(head, row),
        "scenario": scenario,
        "results": {"request_performance": {"aggregate": _aggregate(row)}},
    }
