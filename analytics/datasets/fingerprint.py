"""A run's dataset fingerprint: everything a rerun needs to send exactly the same requests.

A run that reads a dataset (``workload.dataset``, ``.prompts`` or ``.replay``) keeps its
scenario (seed, filters, sampling; ``runs.scenario``) and the dataset by content id
(``datasets``: the entries' SHA-256, the uploaded file's SHA-256, the format and columns
it was converted with, the rows it had and skipped). The report's ``dataset`` entry puts
them side by side with what the run used (requests and distinct rows), docs/workloads.md.
"""

from __future__ import annotations

import json
from typing import Any

import duckdb

from analytics.datasets.uploads import DatasetStore

__all__ = ["dataset_line", "run_dataset"]

ESTIMATE = "estimate (4 characters a token)"


def run_dataset(con: duckdb.DuckDBPyConnection, run_id: str) -> dict[str, Any] | None:
    """The fingerprint of the dataset run ``run_id`` read, None when it read none."""
    # fetchall, not fetchone: a result left unfinished blocks the connection's next
    # relation (DuckDB 2: "connection has an unfinished result"), e.g. the request rows.
    rows = con.execute("SELECT scenario FROM runs WHERE run_id = ?", [run_id]).fetchall()
    if not rows:
        return None
    row = rows[0]
    scenario = json.loads(row[0]) if isinstance(row[0], str) else dict(row[0])
    workload: dict[str, Any] = scenario.get("workload") or {}
    found = [
        (use, workload[use]["dataset"])
        for use in ("dataset", "prompts", "replay")
        if isinstance(workload.get(use), dict) and workload[use].get("dataset")
    ]
    if not found:
        return None
    use, dataset_id = found[0]
    info = DatasetStore(con).find(dataset_id)
    stored = info.fingerprint() if info is not None else {"dataset_id": dataset_id}
    used = con.execute(
        "SELECT count(*), count(DISTINCT dataset_row) FROM requests "
        "WHERE run_id = ? AND dataset_id = ?",
        [run_id, dataset_id],
    ).fetchall()[0]
    result: dict[str, Any] = {
        "use": use,
        **stored,
        "stored": info is not None,
        "seed": scenario.get("seed", 0),
        "lengths_counted_with": _counter(workload.get("tokenizer")),
        "requests": int(used[0]) if used else 0,
        "rows_used": int(used[1]) if used else 0,
    }
    if use == "dataset":
        spec = workload["dataset"]
        result["filters"] = {k: v for k, v in (spec.get("filters") or {}).items() if v is not None}
        result["sample"] = spec.get("sample", "dataset")
        result["replacement"] = bool(spec.get("replacement", False))
    return result


def _counter(tokenizer: object) -> str:
    if not isinstance(tokenizer, dict):
        return ESTIMATE
    if tokenizer.get("hub"):
        revision = tokenizer.get("revision")
        return f"tokenizer {tokenizer['hub']}" + (f"@{revision}" if revision else "")
    return f"tokenizer dataset {tokenizer.get('dataset')}"


def dataset_line(fingerprint: dict[str, Any]) -> str:
    """One line for the text reports."""
    parts = [
        f"dataset {fingerprint['dataset_id']}",
        str(fingerprint.get("origin") or fingerprint.get("source_format") or fingerprint["use"]),
        f"{fingerprint.get('rows_used', 0)} rows in {fingerprint.get('requests', 0)} requests",
        f"seed {fingerprint.get('seed')}",
    ]
    if fingerprint["use"] == "dataset":
        parts.append(f"sample {fingerprint.get('sample')}")
        if fingerprint.get("filters"):
            parts.append(
                "filters " + ", ".join(f"{k} {v}" for k, v in fingerprint["filters"].items())
            )
    parts.append(f"lengths by {fingerprint.get('lengths_counted_with')}")
    return " · ".join(parts)
