"""Tool calls through a real `tokenbench run` (embedded Redis, a real worker, the
simulator, DuckDB): requests carrying tools with a forced tool_choice are answered with
streamed tool calls, TTFT is the first tool-call delta, records keep the tool-call
fields, and the report shows the per-stage tool-call share."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml

from analytics.report.tool_calls import with_tool_calls
from tests.conftest import CliResult

pytestmark = pytest.mark.integration


def _scenario() -> dict[str, Any]:
    length = {"dist": "fixed", "value": 6}
    return {
        "name": "tool-calls",
        "seed": 5,
        "providers": [
            {
                "name": "sim",
                "kind": "simulated",
                "simulate": {"ttft_ms": 20, "itl_ms": 2, "tokens_per_chunk": 2},
            }
        ],
        "workload": {
            "mix": [{"prompt_tokens": length, "output_tokens": length}],
            "tools": {"count": 2, "tool_choice": "required", "fraction": 0.5},
        },
        "load": {"concurrency": [2], "requests_per_level": 40},
    }


def test_a_streamed_tool_call_is_the_first_token_and_is_recorded(
    tmp_path: Path, tokenbench: Callable[..., CliResult]
) -> None:
    path = tmp_path / "tools.yaml"
    path.write_text(yaml.safe_dump(_scenario()))
    db = tmp_path / "tools.duckdb"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENBENCH__")}
    result = tokenbench("run", str(path), "--db", str(db), "--format", "json", env=env)
    assert result.code == 0, result.stderr
    report = json.loads(result.stdout[result.stdout.index("{") :])
    assert report["state"] == "finished"
    con = duckdb.connect(str(db), read_only=True)
    rows = con.execute(
        "SELECT tools_offered, tool_call, tool_calls, tool_call_at_ns, ttft_ns, ttfot_ns, "
        "completion_tokens, token_events, status FROM requests"
    ).fetchall()
    assert len(rows) == 40 and all(row[8] == "ok" for row in rows)
    offered = [row for row in rows if row[0]]
    plain = [row for row in rows if not row[0]]
    assert offered and plain  # about half each (fraction 0.5)
    for _, call, calls, call_at, ttft, ttfot, completion, events, _ in offered:
        # required: every answer is one streamed call, and its first delta is the TTFT
        assert call and calls == 1
        assert call_at == ttft == ttfot and ttft > 0
        assert completion == 6 and events == 3  # 6 tokens at 2 an event
    for _, call, calls, call_at, ttft, _, completion, _, _ in plain:
        assert not call and calls == 0 and call_at is None
        assert ttft > 0 and completion == 6
    (stage,) = report["stages"]
    assert stage["tool_requests"] == len(offered)
    assert stage["tool_call_pct"] == pytest.approx(100)
    assert stage["tool_call_p50_ms"] > 0
    # A run no request of which carried tools keeps its stage rows as they were.
    plain_rows = [{"provider": "sim", "stage": 0, "region": stage["region"]}]
    assert with_tool_calls(con, "no-such-run", plain_rows) is plain_rows
