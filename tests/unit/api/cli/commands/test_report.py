"""`report` and `sql` commands and every report format, on a real DuckDB file."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow.parquet as pq
import pytest
import typer
from typer.testing import CliRunner

from analytics.render.charts import CHARTS, plotly_js
from analytics.render.markdown import render_markdown
from analytics.report.build import build_report
from analytics.report.columns import columns
from analytics.report.formatting import PERCENTILE_HEADER, PERCENTILE_KEYS, percentile_rows
from analytics.sections.registry import build_sections
from analytics.store.db import connect
from api.cli.commands.report import report, sql
from tests.support.builders import MS, REPORT_SCENARIO, S, failed_result, ok_result, store_run
from workers.client.errors import ErrorClass

app = typer.Typer()
app.command()(report)
app.command()(sql)
runner = CliRunner()


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two runs; three providers over two stages (concurrency 1 and 4), some failures."""
    path = tmp_path_factory.mktemp("fmt") / "runs.duckdb"
    con = connect(path)
    rng = np.random.default_rng(5)
    for run_id, scale in (("base", 1.0), ("next", 1.3)):
        shards = {}
        for p_index, provider in enumerate(("api", "gpu", "own")):
            for stage in (0, 1):
                base = (80 + 40 * p_index) * (1 + stage) * scale
                results = [
                    ok_result(
                        10 * S + i * 200 * MS,
                        float(rng.lognormal(np.log(base), 0.3)),
                        list(rng.uniform(5, 12 + 6 * stage, size=20)),
                    )
                    for i in range(60)
                ]
                results += [
                    failed_result(10 * S + i * S, ErrorClass.HTTP_429) for i in range(stage * 3)
                ]
                shards[(provider, stage)] = results
        store_run(con, run_id, REPORT_SCENARIO, shards)
    con.close()
    return path


def test_table_format_lists_rows_intervals_and_flags(db: Path) -> None:
    result = runner.invoke(app, ["report", "base", "--db", str(db)], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert "TTFT latency (ms)" in result.output and "p99.9" in result.output
    assert "http_4" in result.output  # the errors cell, possibly wrapped
    # n = 60: p99 needs 1000 samples, so it is flagged; p50 has an interval.
    assert re.search(r"\d\*", result.output)
    assert "fewer than 10 samples beyond this percentile" in result.output


def _whole(figure: str, line: str) -> bool:
    """Whether ``figure`` is in ``line`` as a whole cell (spaces or the line's ends round it)."""
    return re.search(rf"(^|\s){re.escape(figure)}(\s|$)", line) is not None


def _row_lines(text: str, row: dict[str, Any]) -> list[str]:
    """The lines of a row's cells: they start with its provider, stage and region."""
    keys = [str(row["provider"]), str(row["stage"]), str(row["region"])]
    return [line for line in text.splitlines() if line.split()[:3] == keys]


@pytest.mark.parametrize("width", [80, 120, 200])
@pytest.mark.parametrize("wide", [False, True])
def test_the_table_fits_the_width_and_shows_every_figure_whole(
    db: Path, width: int, wide: bool
) -> None:
    args = ["report", "base", "--db", str(db), "--providers", "api,gpu"]
    result = runner.invoke(app, [*args, *(["--wide"] if wide else [])], env={"COLUMNS": str(width)})
    assert result.exit_code == 0, result.output
    text = result.output
    assert max(len(line) for line in text.splitlines()) <= width
    assert "…" not in text
    stages = json.loads(
        runner.invoke(app, [*args, "--format", "json"], env={"COLUMNS": str(width)}).output
    )["stages"]
    shown = columns("wide" if wide else "compact")
    for row in stages:
        lines = _row_lines(text, row)
        assert lines, row["provider"]
        for column in shown:
            figure = column.text(row)
            assert any(_whole(figure, line) for line in lines), (column.key, figure)
    # The percentile tables: every figure in its metric's section, on its row's lines.
    sections = re.split(r"^\s*(\S[^\n]*?) latency \(ms\)(?: \(\d+/\d+\))?\s*$", text, flags=re.M)
    by_metric: dict[str, str] = {}
    for metric, body in zip(sections[1::2], sections[2::2], strict=True):
        by_metric[metric] = by_metric.get(metric, "") + body
    for line in percentile_rows(stages):
        row = dict(zip(("provider", "stage", "region"), line, strict=False))
        lines = _row_lines(by_metric[line[3]], row)
        for header, figure in zip(
            PERCENTILE_HEADER[PERCENTILE_KEYS:], line[PERCENTILE_KEYS:], strict=True
        ):
            if figure != "–":
                assert any(_whole(figure, x) for x in lines), (line[3], header, figure)
    # The comparison's table follows the percentiles (fitted like them: the width check).
    assert "gpu vs api" in text and "1.00×" not in text.split("gpu vs api")[0]


def test_columns_are_chosen_by_key_or_refused(db: Path) -> None:
    result = runner.invoke(
        app,
        ["report", "base", "--db", str(db), "--columns", "e2e_mean_ms,e2e_std_ms"],
        env={"COLUMNS": "80"},
    )
    assert result.exit_code == 0, result.output
    head = result.output.split("TTFT latency (ms)")[0]
    assert "E2E" in head and "mean" in head and "std" in head and "TTFT" not in head
    stages = build_report(duckdb.connect(str(db), read_only=True), "base").stages
    for row in stages:
        assert any(_whole(f"{row['e2e_std_ms']:,.1f}", x) for x in _row_lines(head, row))
    unknown = runner.invoke(app, ["report", "base", "--db", str(db), "--columns", "ttft_p42_ms"])
    assert unknown.exit_code == 2
    assert "ttft_p42_ms" in unknown.output and "itl_mean_ms" in unknown.output
    both = runner.invoke(app, ["report", "--db", str(db), "--columns", "ttft_p50_ms", "--wide"])
    assert both.exit_code == 2 and "not both" in both.output
    document = runner.invoke(app, ["report", "--db", str(db), "--wide", "--format", "json"])
    assert document.exit_code == 2 and "--format json has every column" in document.output


def test_json_matches_build_report(db: Path) -> None:
    result = runner.invoke(app, ["report", "base", "--db", str(db), "--format", "json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    with duckdb.connect(str(db), read_only=True) as con:
        report = build_report(con, "base")
    expected = json.loads(json.dumps(report.to_dict()))
    # The report itself, and its sections as data (the tables the text formats draw).
    sections = document.pop("sections")
    assert document == expected
    assert [s["key"] for s in sections] == [s.key for s in build_sections(report)]
    assert len(document["stages"]) == 6 and document["pareto"]


def test_provider_and_run_comparisons(db: Path) -> None:
    result = runner.invoke(
        app, ["report", "base", "--db", str(db), "--providers", "api,own", "--format", "markdown"]
    )
    assert result.exit_code == 0, result.output
    assert "## Comparison: own vs api" in result.output
    assert "own's p50 TTFT is" in result.output
    runs = runner.invoke(
        app, ["report", "next", "--db", str(db), "--compare", "base", "--format", "json"]
    )
    assert runs.exit_code == 0, runs.output
    comparison = json.loads(runs.output)["comparison"]
    assert comparison["kind"] == "runs" and len(comparison["rows"]) > 0
    bad = runner.invoke(app, ["report", "base", "--db", str(db), "--providers", "api,zzz"])
    assert bad.exit_code == 2 and "no provider 'zzz'" in bad.output
    missing = runner.invoke(app, ["report", "nope", "--db", str(db)])
    assert missing.exit_code == 2 and "no run 'nope'" in missing.output


def test_markdown_and_html_files(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    result = runner.invoke(
        app, ["report", "base", "--db", str(db), "--format", "html", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    html = out.read_text()
    assert html.startswith("<!DOCTYPE html>")
    # Every chart has data here, each in its own Plotly div; Plotly itself is inlined once.
    assert html.count('class="plotly-graph-div"') == len(CHARTS)
    assert html.count("<script") == len(CHARTS) + 1
    for anchor, heading, _ in CHARTS:
        assert f'id="chart-{anchor}"' in html and heading in html
    # Self-contained: Plotly's bundle is inlined once (its source mentions links, such as
    # map attributions, that a chart without maps never loads) and the page itself links
    # to nothing; tests/unit/analytics/render/test_html_report_browser.py loads it with the network cut.
    assert html.count(plotly_js()) == 1
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html.replace(plotly_js(), ""))
    with duckdb.connect(str(db), read_only=True) as con:
        markdown = render_markdown(build_report(con, "base"))
    assert markdown.splitlines()[2:5] == ["## Summary", "", markdown.splitlines()[4]]
    assert markdown.splitlines()[4].startswith("| provider | stage |")
    assert "| api | 0 | local |" in markdown


def test_sql_command_formats_and_refusals(db: Path, tmp_path: Path) -> None:
    query = (
        "SELECT provider, count(*) AS n FROM requests WHERE run_id = 'base' GROUP BY 1 ORDER BY 1"
    )
    table = runner.invoke(app, ["sql", query, "--db", str(db)])
    assert table.exit_code == 0 and "api" in table.output and "3 rows" in table.output
    as_json = runner.invoke(app, ["sql", query, "--db", str(db), "--format", "json"])
    assert json.loads(as_json.output) == [{"provider": p, "n": 123} for p in ("api", "gpu", "own")]
    csv = runner.invoke(app, ["sql", query, "--db", str(db), "--format", "csv"])
    assert csv.output.splitlines()[1] == '"api",123'
    target = tmp_path / "q.parquet"
    parquet = runner.invoke(
        app, ["sql", query, "--db", str(db), "--format", "parquet", "-o", str(target)]
    )
    assert parquet.exit_code == 0 and pq.read_table(target).num_rows == 3
    refused = runner.invoke(app, ["sql", "COPY requests TO '/tmp/x.csv'", "--db", str(db)])
    assert refused.exit_code == 2 and "COPY statements are refused" in refused.output
    capped = runner.invoke(
        app, ["sql", "SELECT * FROM requests", "--db", str(db), "--max-rows", "5"]
    )
    # 2 runs × 3 providers × (60 + 63) requests: the table says how many it cut.
    assert capped.exit_code == 0
    assert "5 of 738 rows shown; 733 cut at --max-rows 5" in capped.output


def test_the_table_report_ends_with_why_requests_failed(db: Path) -> None:
    result = runner.invoke(app, ["report", "base", "--db", str(db)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    start = [line.strip() for line in lines].index("Most frequent errors")
    assert lines[start + 1].split() == ["provider", "stage", "region", "failed", "class", "message"]
    assert lines[start + 3].split() == ["api", "1", "local", "3", "of", "3", "http_429", "x"]
    assert "api s1 local " in " ".join(result.output.split())  # the rate requests ended at
    caption = " ".join(result.output.split())  # the caption wraps at the terminal's width
    assert "req/s, tok/s and goodput over successful requests only" in caption
