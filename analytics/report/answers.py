"""The report's answers (docs/answers.md): what a sweep or a capacity search found, and
which stages ended early, read from the tables the control plane wrote (schema v18)
and the report's own stage rows.

- ``capacity``: per provider and region, the load shown to hold the SLO with
  confidence, the bracket around it, the attainment there and the cost per 1M output
  tokens at that load, as one sentence that heads every format;
- ``sweep``: per provider and region, the curve's points (achieved req/s against TTFT)
  and its knee (``analytics/decide/sweep.py``);
- ``ended``: each stage a provider's shards stopped early (over-saturated, interval tight
  enough, verdict already certain) or that was marked, with its evidence and the
  requests it did not send.

Stage rows of a run with decided or ended stages also carry ``stage_role`` and
``stage_outcome``, which the text formats show beside the stage number.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import duckdb
from pydantic import ValidationError

from analytics.decide.sweep import CurvePoint, knee
from analytics.sql.results import first_row
from analytics.store.adaptive_runs import capacity_rows, outcome_rows, role_rows, verdict_rows
from scenarios.model import Scenario
from scenarios.slo import SLO

__all__ = ["ANSWER_MARKS", "build_answers", "slo_text", "with_stage_marks"]

# How a stage's outcome is marked beside its number in the text formats.
ANSWER_MARKS = {"saturated": "sat", "stopped_early": "early"}
MARKS_NOTE = (
    "sat: stopped as over-saturated; early: stopped early (interval tight enough, or "
    "verdict certain); (marked): detected but left running (docs/answers.md)"
)


def slo_text(slo: SLO, attainment: float) -> str:
    """``p99 TTFT ≤ 500 ms`` (one objective), ``99 % within TTFT ≤ 500 ms and TPOT ≤ 50
    ms`` (several)."""
    targets = [
        f"{name} ≤ {value:g} ms"
        for name, value in (("TTFT", slo.ttft_ms), ("TPOT", slo.tpot_ms), ("E2E", slo.e2e_ms))
        if value is not None
    ]
    share = f"{attainment * 100:g}"
    if len(targets) == 1:
        return f"p{share} {targets[0]}"
    return f"{share} % within {' and '.join(targets)}"


def _scenario(con: duckdb.DuckDBPyConnection, run_id: str) -> Scenario | None:
    row = first_row(con.execute("SELECT scenario FROM runs WHERE run_id = ?", [run_id]))
    if row is None:
        return None
    try:
        return Scenario.model_validate_json(row[0])
    except ValidationError:
        return None  # a scenario this version cannot read: no answers, the rest reports


def with_stage_marks(
    con: duckdb.DuckDBPyConnection, run_id: str, stages: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Stage rows with ``stage_role`` and ``stage_outcome`` (None in a fixed plan and for
    a stage that ran to its end) and ``offered_rps`` (None for a closed loop)."""
    roles = {(r.stage, r.provider): r.role for r in role_rows(con, run_id)}
    outcomes = {(o.stage, o.provider): o for o in outcome_rows(con, run_id)}
    stored = con.execute(
        "SELECT stage, provider, max(TRY_CAST(json_extract(spec, '$.rate.rps') AS DOUBLE)) "
        "FROM shards WHERE run_id = ? GROUP BY ALL",
        [run_id],
    ).fetchall()
    rates = {(int(r[0]), str(r[1])): r[2] for r in stored}
    out = []
    for row in stages:
        key = (row["stage"], row["provider"])
        outcome = outcomes.get(key)
        mark = None
        if outcome is not None:
            mark = outcome.outcome if outcome.acted else f"{outcome.outcome} (marked)"
        out.append(
            {
                **row,
                "offered_rps": rates.get(key),
                "stage_role": roles.get(key),
                "stage_outcome": mark,
            }
        )
    return out


def build_answers(
    con: duckdb.DuckDBPyConnection, run_id: str, stages: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    """The run's answers from its stage rows (those of ``with_stage_marks``); empty
    lists for a run that decided nothing and ended nothing early."""
    scenario = _scenario(con, run_id)
    answers: dict[str, Any] = {
        "capacity": _capacity(con, run_id, scenario, stages),
        "sweep": _sweeps(scenario, stages),
        "ended": _ended(con, run_id, stages),
    }
    saved = [e["requests_saved"] for e in answers["ended"] if e["requests_saved"] is not None]
    answers["requests_saved"] = sum(saved) if saved else None
    answers["notes"] = MARKS_NOTE if answers["ended"] else None
    return answers


def _rows_at(stages: Sequence[dict[str, Any]], stage: int | None, provider: str) -> list[Any]:
    return [r for r in stages if r["stage"] == stage and r["provider"] == provider]


def _capacity(
    con: duckdb.DuckDBPyConnection,
    run_id: str,
    scenario: Scenario | None,
    stages: Sequence[dict[str, Any]],
) -> list[dict[str, Any]]:
    search = scenario.load.find_capacity if scenario is not None else None
    if search is None:
        return []
    verdicts = {(v.stage, v.provider): v for v in verdict_rows(con, run_id)}
    regions = scenario.regions if scenario is not None else []
    unit = "req/s" if search.by == "rate" else "streams"
    objective = slo_text(search.slo, search.attainment)
    out = []
    for result in capacity_rows(con, run_id):
        for region in regions:
            here = [r for r in _rows_at(stages, result.low_stage, result.provider)
                    if r["region"] == region]  # fmt: skip
            row = here[0] if here else None
            verdict = (
                None
                if result.low_stage is None
                else verdicts.get((result.low_stage, result.provider))
            )
            figures = (verdict.regions.get(region) if verdict is not None else None) or {}
            low, high = result.low, result.high
            entry: dict[str, Any] = {
                "provider": result.provider,
                "region": region,
                "by": result.search_by,
                "unit": unit,
                "state": result.state,
                "low": low,
                "high": high,
                "capacity": (low + high) / 2 if low is not None and high is not None else low,
                "half_width": (high - low) / 2 if low is not None and high is not None else None,
                "low_stage": result.low_stage,
                "high_stage": result.high_stage,
                "stages": result.stages,
                "slo": search.slo.model_dump(),
                "objective": objective,
                "attainment_target": search.attainment,
                "confidence": search.confidence,
                "precision": search.precision,
                "attainment": figures.get("attainment"),
                "attainment_low": figures.get("low"),
                "request_rate": row.get("request_rate") if row else None,
                "cost_per_mtok_output": row.get("cost_per_mtok_output") if row else None,
                "message": result.message,
            }
            entry["answer"] = _capacity_sentence(entry)
            out.append(entry)
    return out


def _capacity_sentence(entry: dict[str, Any]) -> str:
    who = f"{entry['provider']} · {entry['region']}"
    unit, objective = entry["unit"], entry["objective"]
    low, high, state = entry["low"], entry["high"], entry["state"]
    if state == "unattainable" or (low is None and state != "searching"):
        return f"{who}: does not hold {objective} at any load probed ({entry['message']})"
    if low is None:
        return f"{who}: no load shown to hold {objective} yet ({entry['message']})"
    if high is not None:
        head = (
            f"{who}: holds {entry['capacity']:.4g} {unit} ± {entry['half_width']:.2g} at "
            f"{objective} ({low:g} held"
        )
    else:
        head = f"{who}: holds at least {low:g} {unit} at {objective} ({low:g} held"
    if entry["attainment"] is not None:
        head += f": {entry['attainment'] * 100:.1f} % met"
        if entry["attainment_low"] is not None:
            head += (
                f", ≥ {entry['attainment_low'] * 100:.1f} % with "
                f"{entry['confidence'] * 100:g} % confidence"
            )
    head += f"; {high:g} did not)" if high is not None else ")"
    if entry["cost_per_mtok_output"] is not None:
        head += f"; costs ${entry['cost_per_mtok_output']:,.4g} per 1M output tokens there"
    if state == "max_stages":
        head += f" [{entry['message']}]"
    if state == "at_max":
        head += " [the most the search may probe]"
    return head


def _sweeps(scenario: Scenario | None, stages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    sweep = scenario.load.sweep if scenario is not None else None
    if sweep is None:
        return []
    out = []
    keys = sorted({(r["provider"], r["region"]) for r in stages})
    for provider, region in keys:
        rows = sorted(
            (r for r in stages if (r["provider"], r["region"]) == (provider, region)),
            key=lambda r: int(r["stage"]),
        )
        points = [_point(r) for r in rows if r.get("stage_role")]
        curve = [
            CurvePoint(p["stage"], p["role"], p["request_rate"], p["ttft_p50_ms"],
                       p["outcome"] == "saturated")
            for p in points
        ]  # fmt: skip
        found = knee(curve, sweep.knee_factor)
        sync = next((p for p in points if p["role"] == "synchronous"), None)
        top = next((p for p in points if p["role"] == "throughput"), None)
        entry: dict[str, Any] = {
            "provider": provider,
            "region": region,
            "knee_factor": sweep.knee_factor,
            "points": points,
            "knee": None if found is None else next(p for p in points if p["stage"] == found.stage),
            "synchronous_rps": sync["request_rate"] if sync else None,
            "throughput_rps": top["request_rate"] if top else None,
        }
        entry["answer"] = _sweep_sentence(entry, sync)
        out.append(entry)
    return out


def _point(row: dict[str, Any]) -> dict[str, Any]:
    open_loop = row.get("load_kind") == "open"
    return {
        "stage": row["stage"],
        "role": row["stage_role"],
        "offered_rps": row.get("offered_rps"),
        "request_rate": row.get("request_rate"),
        "output_tok_s": row.get("output_tok_s"),
        "ttft_p50_ms": row.get("ttft_intent_p50_ms" if open_loop else "ttft_p50_ms"),
        "ttft_p99_ms": row.get("ttft_intent_p99_ms" if open_loop else "ttft_p99_ms"),
        "outcome": (row.get("stage_outcome") or "").removesuffix(" (marked)") or None,
    }


def _sweep_sentence(entry: dict[str, Any], sync: dict[str, Any] | None) -> str:
    who = f"{entry['provider']} · {entry['region']}"
    point = entry["knee"]
    if point is None or sync is None:
        return f"{who}: no knee (the synchronous stage measured no TTFT)"
    sentence = (
        f"{who}: knee at {point['request_rate']:.3g} req/s (stage {point['stage']}, "
        f"{point['role']}): median TTFT {point['ttft_p50_ms']:,.0f} ms, within "
        f"{entry['knee_factor']:g}× the synchronous {sync['ttft_p50_ms']:,.0f} ms (p99 "
        f"{point['ttft_p99_ms']:,.0f} ms)"
    )
    if entry["throughput_rps"] is not None:
        sentence += f"; at most {entry['throughput_rps']:.3g} req/s served (throughput stage)"
    return sentence


def _ended(
    con: duckdb.DuckDBPyConnection, run_id: str, stages: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    out = []
    for row in outcome_rows(con, run_id):
        recorded = sum(int(r["requests"]) for r in _rows_at(stages, row.stage, row.provider))
        saved = None
        if row.acted and row.requests_planned is not None:
            saved = max(0, row.requests_planned - recorded)
        out.append(
            {
                "stage": row.stage,
                "provider": row.provider,
                "outcome": row.outcome,
                "acted": row.acted,
                "reason": row.reason,
                "evidence": row.evidence,
                "requests_planned": row.requests_planned,
                "requests_at_decision": row.requests_done,
                "requests_recorded": recorded,
                "requests_saved": saved,
                "elapsed_s": row.elapsed_s,
            }
        )
    return out
