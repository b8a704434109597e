"""The HTML report in a real headless Chromium, offline: it loads without a console message
and every chart draws (Plotly's ``main-svg`` with traces inside each chart's section).

Chromium runs with name resolution cut (``--host-resolver-rules``) and background
networking off, as on a machine with no network: a page that needed a CDN would not draw
(tests/unit/analytics/render/test_report_formats.py checks that the markup links nothing). The DOM is
read after the scripts ran (``--dump-dom`` with a virtual-time budget); console messages
come from Chromium's log on stderr (``--enable-logging=stderr``), where an uncaught error
is a ``CONSOLE`` line like any ``console.error``. The page writes nothing to the console.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from analytics.render.charts import chart_divs
from analytics.render.html_report import render_html
from analytics.report.build import build_report
from tests.support.regional_run import open_read_only, store_regional_run

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium binary on PATH (.ci/run installs Debian's chromium)"
)
def test_report_loads_offline_without_console_messages_and_every_chart_draws(
    tmp_path: Path,
) -> None:
    assert CHROMIUM is not None
    store_regional_run(tmp_path / "runs.duckdb")
    with open_read_only(tmp_path / "runs.duckdb") as con:
        report = build_report(con, "run").with_provider_comparison("api", "gpu")
    charts = chart_divs(report)
    page = tmp_path / "report.html"
    page.write_text(render_html(report))
    done = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update",
         "--host-resolver-rules=MAP * ~NOTFOUND", f"--user-data-dir={tmp_path / 'profile'}",
         "--enable-logging=stderr", "--v=0", "--virtual-time-budget=20000",
         "--window-size=1400,2400", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=180, check=False,
        env={**os.environ, "HOME": str(tmp_path)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    assert console == [], "\n".join(console)
    dom = done.stdout
    sections = dom.split('<section class="chart"')[1:]
    assert len(sections) == len(charts) == 6
    for section, (anchor, _, _) in zip(sections, charts, strict=True):
        assert f'id="{anchor}"' in section.split(">", 1)[0]
        assert 'class="main-svg"' in section, f"{anchor}: Plotly drew nothing"
        assert re.search(r'class="trace ', section), f"{anchor}: a plot without data"
        assert 'class="legendtext"' in section, f"{anchor}: no legend"
    latency = sections[[a for a, _, _ in charts].index("latency-throughput")]
    legend = re.findall(r'class="legendtext"[^>]*>([^<]+)<', latency)
    assert any(t.endswith("p50") for t in legend) and any(t.endswith("p99") for t in legend)
