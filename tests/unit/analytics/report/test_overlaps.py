"""analytics/report/overlaps.py: the runs that measured a shared provider's target
while the run went, and nothing for a provider holding its target alone."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from analytics.report.overlaps import shared_overlaps
from analytics.store.db import connect
from scenarios.loader import validate_scenario

T0 = dt.datetime(2026, 12, 4, 12, 0, tzinfo=dt.UTC)


def _scenario(url: str, shared: bool) -> str:
    return validate_scenario(
        {
            "name": "o",
            "providers": [
                {"name": "p", "kind": "openai", "base_url": url, "model": "m", "shared": shared}
            ],
            "workload": {
                "mix": [
                    {
                        "prompt_tokens": {"dist": "fixed", "value": 4},
                        "output_tokens": {"dist": "fixed", "value": 2},
                    }
                ]
            },
            "load": {"concurrency": [1], "requests_per_level": 1},
        }
    ).model_dump_json()


def test_overlapping_runs_on_the_shared_target(tmp_path: Path) -> None:
    con = connect(tmp_path / "o.duckdb")
    rows = [
        ("mine", "http://h/v1", True, 0, 60),
        ("with", "http://H:80/v1/", True, 30, 90),  # the same target: 30 s together
        ("before", "http://h/v1", True, -120, -60),  # ended before mine started
        ("elsewhere", "http://other/v1", True, 0, 60),
        ("alone", "http://other/v1", False, 0, 60),
    ]
    for run_id, url, shared, start, end in rows:
        con.execute(
            "INSERT INTO runs VALUES (?, 'o', ?, ?, ?, 'finished')",
            [
                run_id,
                _scenario(url, shared),
                T0 + dt.timedelta(seconds=start),
                T0 + dt.timedelta(seconds=end),
            ],
        )
    (overlap,) = shared_overlaps(con, "mine")
    assert (overlap["run_id"], overlap["provider"], overlap["overlap_s"]) == ("with", "p", 30.0)
    assert overlap["target"] == "http://h/v1 model=m key=-"
    assert shared_overlaps(con, "alone") == []  # not shared: nothing to say
    assert shared_overlaps(con, "nope") == []
