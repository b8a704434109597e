"""What a run spent on token-priced providers, beside its dry-run bound (docs/teams.md,
"Budgets and the spend ledger").

Computed from the run's records × its list prices with the ledger's own rule (the
control plane upserts the same figures into ``spend_ledger`` while the run goes:
api/control/spend.py): every record counts, its reported prompt tokens (an answered
request without a count: its planned prompt) and its completion tokens. The bound is the
one computed when the run was submitted (``run_cost_bounds.plan``), summed over regions.
"""

from __future__ import annotations

import json
from typing import Any

import duckdb

from analytics.sql.results import first_row

_SPEND_SQL = """
SELECT r.provider,
       sum(billed_prompt_tokens(r.prompt_tokens, r.planned_prompt_tokens, r.status))
           AS input_tokens,
       sum(coalesce(r.completion_tokens, 0)) AS output_tokens,
       sum(list_cost_usd(
           billed_prompt_tokens(r.prompt_tokens, r.planned_prompt_tokens, r.status),
           coalesce(r.completion_tokens, 0), p.input_per_mtok, p.output_per_mtok)) AS usd
FROM request_records AS r
JOIN providers AS p ON p.run_id = r.run_id AND p.provider = r.provider
WHERE r.run_id = ? AND p.input_per_mtok IS NOT NULL
GROUP BY r.provider
ORDER BY r.provider
"""


def run_spend(con: duckdb.DuckDBPyConnection, run_id: str) -> dict[str, Any] | None:
    """Per token-priced provider the tokens and USD the run spent and its bound; the
    totals, the run's cap and why it was stopped. None for a run without a priced
    provider."""
    priced = [
        str(row[0])
        for row in con.execute(
            "SELECT provider FROM providers WHERE run_id = ? AND input_per_mtok IS NOT NULL "
            "ORDER BY provider",
            [run_id],
        ).fetchall()
    ]
    if not priced:
        return None
    spent = {
        str(row[0]): {"input_tokens": int(row[1]), "output_tokens": int(row[2]), "usd": row[3]}
        for row in con.execute(_SPEND_SQL, [run_id]).fetchall()
    }
    stored = first_row(
        con.execute(
            "SELECT cost_bound_usd, max_cost_usd, plan, stop_reason, stop_detail "
            "FROM run_cost_bounds WHERE run_id = ?",
            [run_id],
        )
    )
    bounds: dict[str, float | None] = {}
    if stored is not None and stored[2] is not None:
        for row in json.loads(stored[2]).get("rows", []):
            if row.get("priced"):
                before = bounds.get(row["provider"], 0.0)
                cost = row.get("cost_bound_usd")
                bounds[row["provider"]] = (
                    None if cost is None or before is None else before + float(cost)
                )
    rows = [
        {
            "provider": name,
            "input_tokens": spent.get(name, {}).get("input_tokens", 0),
            "output_tokens": spent.get(name, {}).get("output_tokens", 0),
            "usd": float(spent.get(name, {}).get("usd") or 0.0),
            "bound_usd": bounds.get(name),
        }
        for name in priced
    ]
    return {
        "rows": rows,
        "usd": sum(row["usd"] for row in rows),
        "bound_usd": None if stored is None else stored[0],
        "max_cost_usd": None if stored is None else stored[1],
        "stop_reason": None if stored is None else stored[3],
        "stop_detail": None if stored is None else stored[4],
    }
