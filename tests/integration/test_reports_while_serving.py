"""Reports while a control plane serves: `tokenbench serve` holds its DuckDB file, so
`report`, `sql` and `shadow compare` read through its REST API (``--server``); the local
commands on that file say so in one line. ``GET /v1/runs/{id}/report`` serves every
document format, by ``?format=`` or ``Accept``. Real processes: uvicorn (serve),
Redis, a Celery worker, the CLI."""

from __future__ import annotations

import csv
import io
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import API_TOKEN, CliResult, Proc, start_control_plane, wait_for_run
from workers.shard.progress import RELATIVE_ERROR

pytestmark = pytest.mark.integration


def _scenario(name: str, slow_ttft_ms: float) -> dict[str, Any]:
    """Two simulated providers, one stage, in the eu worker's region."""
    return {
        "name": name,
        "providers": [
            {"name": "fast", "kind": "simulated", "simulate": {"ttft_ms": 10, "itl_ms": 1}},
            {"name": "slow", "kind": "simulated", "simulate": {"ttft_ms": slow_ttft_ms}},
        ],
        "workload": {
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": 8},
                    "output_tokens": {"dist": "fixed", "value": 4},
                }
            ]
        },
        "load": {"concurrency": [2], "requests_per_level": 10},
        "regions": ["eu"],
    }


@dataclass
class Served:
    """The serving control plane, its (held) DuckDB file and two finished runs."""

    client: httpx.Client
    base: str
    db: Path
    first: str
    second: str

    def cli(self) -> list[str]:
        return ["--server", self.base, "--token", API_TOKEN]


@pytest.fixture(scope="module")
def served(
    eu_worker: Proc, worker_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("serving")
    db = tmp / "served.duckdb"
    proc, base = start_control_plane(worker_env, db, tmp / "serve.log")
    headers = {"authorization": f"Bearer {API_TOKEN}"}
    with httpx.Client(base_url=base, headers=headers, timeout=60) as client:
        ids = []
        for name, slow in (("baseline", 30.0), ("candidate", 45.0)):
            created = client.post("/v1/runs", json={"scenario": _scenario(name, slow)})
            assert created.status_code == 201, created.text
            ids.append(created.json()["id"])
            assert wait_for_run(client, ids[-1])["state"] == "finished"
        yield Served(client, base, db, ids[0], ids[1])
    proc.stop()


def _env() -> dict[str, str]:
    """This environment without a server or token of its own: the tests name theirs."""
    return {
        k: v for k, v in os.environ.items() if k not in ("TOKENBENCH_SERVER", "TOKENBENCH_TOKEN")
    }


def test_the_report_route_serves_each_format(served: Served) -> None:
    client, run = served.client, served.second
    by_query = {name: client.get(f"/v1/runs/{run}/report", params={"format": name})
                for name in ("json", "markdown", "html", "csv")}  # fmt: skip
    for answer in by_query.values():
        assert answer.status_code == 200, answer.text
        assert answer.headers["x-content-type-options"] == "nosniff"
    report = by_query["json"].json()
    assert by_query["json"].headers["content-type"] == "application/json"
    assert report["run_id"] == run and report["state"] == "finished"
    assert {row["provider"] for row in report["stages"]} == {"fast", "slow"}
    assert sum(row["requests"] for row in report["stages"]) == 20

    markdown = by_query["markdown"]
    assert markdown.headers["content-type"].startswith("text/markdown")
    assert f"# tokenbench run {run}" in markdown.text and "| fast |" in markdown.text

    csv_answer = by_query["csv"]
    assert csv_answer.headers["content-type"].startswith("text/csv")
    lines = csv_answer.text.splitlines()
    header = lines[0].split(",")
    assert header[:2] == ["provider", "stage"] and "region" in header
    assert len(lines) == 1 + len(report["stages"])

    html = by_query["html"]
    assert html.headers["content-type"].startswith("text/html")
    assert html.text.startswith("<!DOCTYPE html>") and run in html.text
    # A page built from submitters' text is served in a sandbox of its own.
    assert html.headers["content-security-policy"].startswith("sandbox")

    # The same documents by Accept; no header (or */*) is JSON.
    for accept, name in (
        ("text/markdown", "markdown"),
        ("text/csv", "csv"),
        ("text/html,application/xhtml+xml,*/*;q=0.8", "html"),
        ("application/json", "json"),
        ("*/*", "json"),
    ):
        answer = client.get(f"/v1/runs/{run}/report", headers={"accept": accept})
        assert answer.status_code == 200
        assert answer.text == by_query[name].text, accept
        assert answer.headers["vary"] == "Accept"

    unknown = client.get(f"/v1/runs/{run}/report", params={"format": "xml"})
    assert unknown.status_code == 422
    assert unknown.json()["error"] == "bad_input"
    assert unknown.json()["formats"] == ["json", "markdown", "html", "csv"]
    refused = client.get(f"/v1/runs/{run}/report", headers={"accept": "image/png"})
    assert refused.status_code == 406
    assert refused.json()["error"] == "bad_input" and "format=" in refused.json()["detail"]
    assert client.get("/v1/runs/nope/report", params={"format": "html"}).status_code == 404


def test_the_report_route_compares_runs_and_providers(served: Served) -> None:
    client = served.client
    runs = client.get(f"/v1/runs/{served.second}/report", params={"compare": served.first}).json()[
        "comparison"
    ]
    assert (runs["kind"], runs["a"], runs["b"]) == ("runs", served.first, served.second)
    assert runs["rows"]
    providers = client.get(
        f"/v1/runs/{served.second}/report", params={"providers": "fast,slow"}
    ).json()["comparison"]
    assert (providers["kind"], providers["a"], providers["b"]) == ("providers", "fast", "slow")
    both = client.get(
        f"/v1/runs/{served.second}/report", params={"providers": "fast,slow", "compare": "x"}
    )
    assert both.status_code == 422
    unknown = client.get(f"/v1/runs/{served.second}/report", params={"providers": "fast,nope"})
    assert unknown.status_code == 404 and "nope" in unknown.json()["detail"]


def test_the_json_report_carries_each_requests_row_when_asked(
    served: Served, tokenbench: Callable[..., CliResult]
) -> None:
    client, run = served.client, served.second
    answer = client.get(f"/v1/runs/{run}/report", params={"requests": "true"})
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-tokenbench-truncated"] == "false"
    document = answer.json()
    rows = document.pop("requests")
    assert (document.pop("requests_total"), document.pop("requests_truncated")) == (20, False)
    assert document == client.get(f"/v1/runs/{run}/report").json()  # the report, unchanged
    assert len(rows) == 20 and {row["provider"] for row in rows} == {"fast", "slow"}
    assert all(row["status"] == "ok" and row["ttft_ms"] > 0 for row in rows)
    assert "run_id" not in rows[0] and rows[0]["sent_at"].endswith("+00:00")
    refused = client.get(f"/v1/runs/{run}/report", params={"requests": "true", "format": "html"})
    assert refused.status_code == 422 and "needs the json format" in refused.json()["detail"]

    # The command line reads every row through the records route, not the capped report.
    target = served.db.parent / "with-requests.json"
    shown = tokenbench(
        "report", run, *served.cli(), "--format", "json", "--requests", "-o", str(target),
        env=_env(),
    )  # fmt: skip
    assert shown.code == 0, shown.stderr
    assert f"report with 20 requests written to {target}" in shown.stderr
    written = json.loads(target.read_text())
    key = ("stage", "shard_id", "seq")
    assert sorted(tuple(r[k] for k in key) for r in written["requests"]) == sorted(
        tuple(r[k] for k in key) for r in rows
    )
    assert written["requests_truncated"] is False
    not_json = tokenbench("report", run, *served.cli(), "--requests", env=_env())
    assert not_json.code == 2 and "--requests needs --format json" in not_json.stderr


def test_report_through_the_server_while_it_serves(
    served: Served, tokenbench: Callable[..., CliResult]
) -> None:
    shown = tokenbench("report", served.second, *served.cli(), "--format", "json", env=_env())
    assert shown.code == 0, shown.stderr
    route = served.client.get(f"/v1/runs/{served.second}/report").json()
    assert json.loads(shown.stdout) == route

    for fmt in ("markdown", "html"):
        document = tokenbench("report", served.second, *served.cli(), "--format", fmt, env=_env())
        assert document.code == 0, document.stderr
        served_text = served.client.get(
            f"/v1/runs/{served.second}/report", params={"format": fmt}
        ).text
        assert document.stdout == served_text, fmt

    latest = tokenbench("report", "latest", *served.cli(), env=_env())
    assert latest.code == 0, latest.stderr
    assert served.second in latest.stdout and "fast" in latest.stdout

    versus = tokenbench(
        "report", served.second, *served.cli(), "--compare", served.first, "--format", "json",
        env=_env(),
    )  # fmt: skip
    assert versus.code == 0, versus.stderr
    assert json.loads(versus.stdout)["comparison"]["a"] == served.first
    pair = tokenbench(
        "report", served.second, *served.cli(), "--providers", "fast,slow", env=_env()
    )
    assert pair.code == 0, pair.stderr
    assert "slow vs fast" in pair.stdout

    missing = tokenbench("report", "no-such-run", *served.cli(), env=_env())
    assert missing.code == 2
    assert "HTTP 404" in missing.stderr and "Traceback" not in missing.stderr
    both = tokenbench("report", *served.cli(), "--db", str(served.db), env=_env())
    assert both.code == 2 and "not both" in both.stderr


def test_sql_through_the_server_while_it_serves(
    served: Served, tokenbench: Callable[..., CliResult]
) -> None:
    query = (
        "SELECT provider, count(*) AS n FROM requests "
        f"WHERE run_id = '{served.first}' GROUP BY provider ORDER BY provider"
    )
    as_json = tokenbench("sql", query, *served.cli(), "--format", "json", env=_env())
    assert as_json.code == 0, as_json.stderr
    assert json.loads(as_json.stdout) == [
        {"provider": "fast", "n": 10},
        {"provider": "slow", "n": 10},
    ]

    as_csv = tokenbench("sql", query, *served.cli(), "--format", "csv", env=_env())
    assert as_csv.code == 0, as_csv.stderr
    assert list(csv.reader(io.StringIO(as_csv.stdout))) == [
        ["provider", "n"], ["fast", "10"], ["slow", "10"],
    ]  # fmt: skip

    table = tokenbench("sql", query, *served.cli(), "--max-staleness-s", "0", env=_env())
    assert table.code == 0, table.stderr
    assert "fast" in table.stdout and "2 rows" in table.stdout

    capped = tokenbench("sql", query, *served.cli(), "--max-rows", "1", env=_env())
    assert capped.code == 0 and "1 rows shown; more cut at --max-rows 1" in capped.stdout
    # An export is never cut: past its cap it fails, naming the cap, and writes nothing.
    target = served.db.parent / "capped.csv"
    export = tokenbench(
        "sql", query, *served.cli(), "--max-rows", "1", "--format", "csv", "-o", str(target),
        env=_env(),
    )  # fmt: skip
    assert export.code == 2 and not target.exists()
    assert "more than 1 rows (--max-rows 1): nothing was written" in export.stderr

    refused = tokenbench("sql", "DROP TABLE runs", *served.cli(), env=_env())
    assert refused.code != 0
    assert "only SELECT" in refused.stderr and "Traceback" not in refused.stderr
    bad = tokenbench("sql", "SELECT nope FROM runs", *served.cli(), env=_env())
    assert bad.code == 2 and "HTTP 400" in bad.stderr


def test_local_commands_on_the_held_file_point_to_server(
    served: Served, tokenbench: Callable[..., CliResult]
) -> None:
    db = str(served.db)
    for command in (
        ("report", "latest", "--db", db),
        ("report", "latest", "--db", db, "--format", "html"),
        ("sql", "SELECT 1", "--db", db),
        ("shadow", "compare", "some-session", "--db", db),
        ("shadow", "export-replay", "some-session", "-o", "/dev/null", "--db", db),
    ):
        result = tokenbench(*command, env=_env())
        assert result.code == 1, (command, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, (command, result.stderr)
        assert lines[0].startswith(f"{db} is in use by process"), lines[0]
        assert "--server URL" in lines[0]
        assert result.stdout == ""


def test_the_live_ttft_of_a_finished_stage_is_its_reports(served: Served) -> None:
    """While the next stage runs, the view of a finished stage carries each shard's own
    median TTFT (sent by its worker over all its requests), the report's figure."""
    scenario = _scenario("live", 30.0)
    scenario["providers"] = scenario["providers"][:1]
    scenario["providers"][0]["simulate"] = {"ttft_ms": 30, "itl_ms": 20}
    scenario["load"] = {"concurrency": [2, 1], "requests_per_level": 30}
    created = served.client.post("/v1/runs", json={"scenario": scenario})
    assert created.status_code == 201, created.text
    run_id = created.json()["id"]
    live = None
    deadline = time.monotonic() + 120
    while live is None:
        assert time.monotonic() < deadline, "the first stage did not finish"
        view = served.client.get(f"/v1/runs/{run_id}").json()
        assert view["state"] == "running", "the second stage ended before it was seen"
        if [s["state"] for s in view["stages"]] == ["finished", "running"]:
            live = view["stages"][0]["shards"]
        else:
            time.sleep(0.05)
    assert wait_for_run(served.client, run_id)["state"] == "finished"
    report = served.client.get(f"/v1/runs/{run_id}/report").json()
    [row] = [r for r in report["stages"] if r["stage"] == 0]
    [shard] = live
    assert shard["requests_done"] == 30 and shard["ttft_p50_ms"] is not None
    assert shard["ttft_p50_ms"] == pytest.approx(row["ttft_p50_ms"], rel=RELATIVE_ERROR + 1e-6)
