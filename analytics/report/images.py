"""Images per stage (workload.images, docs/workloads.md): shown only when some request of
the run carried images, so runs without images keep their stage rows as they were."""

from __future__ import annotations

from typing import Any

import duckdb

from analytics.sql.files import load_sql

_FIELDS = (
    "image_requests",
    "image_share_pct",
    "images_per_request_mean",
    "image_bytes_mean",
    "image_tokens_mean",
    "text_prompt_tokens_mean",
)


def with_images(
    con: duckdb.DuckDBPyConnection, run_id: str, stages: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Stage rows with the requests that carried images and their share (%), images and
    encoded bytes per such request, the mean image tokens the server reported (None
    where it reports none) and the mean text prompt tokens where known, if any request
    of the run carried images."""
    rows = con.execute(load_sql("images"), {"run_id": run_id}).fetchall()
    if not any(row[3] for row in rows):
        return stages
    by_stage = {(r[0], r[1], r[2]): r[3:] for r in rows}
    empty = (0, 0.0, None, None, None, None)
    return [
        {
            **row,
            **dict(
                zip(
                    _FIELDS,
                    by_stage.get((row["provider"], row["stage"], row["region"]), empty),
                    strict=True,
                )
            ),
        }
        for row in stages
    ]
