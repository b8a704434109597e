"""api/cli/console.py: stage progress bars drawn from a run's public view, and the
report printed as tables (with every warning), JSON, or raw markdown and HTML."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from rich.console import Console

from analytics.render.html_report import render_html
from analytics.render.markdown import render_markdown
from analytics.report.build import RunReport
from analytics.sections.registry import build_sections
from api.cli.console import StageProgress, print_report
from api.schemas import RunPublic, ShardPublic, StagePublic


def _console() -> Console:
    return Console(file=io.StringIO(), width=250, force_terminal=False, color_system=None)


def _shard(
    index: int,
    done: int,
    planned: int | None,
    errors: int = 0,
    ttft: float | None = None,
    provider: str = "sim",
    region: str = "eu",
) -> ShardPublic:
    return ShardPublic(
        shard_id=f"s{index}.{done}", provider=provider, region=region, state="running",
        concurrency=1, attempt=1, requests_done=done, requests_planned=planned,
        errors=errors, ttft_p50_ms=ttft, message=None,
    )  # fmt: skip


def _view(stages: list[tuple[str, list[ShardPublic]]]) -> RunPublic:
    return RunPublic(
        id="run-1", name="progress", state="running", requests_done=0, requests_planned=None,
        errors=0, ttft_p50_ms=None,
        stages=[
            StagePublic(index=i, concurrency=2 ** i, state=state, shards=shards)
            for i, (state, shards) in enumerate(stages)
        ],
    )  # fmt: skip


def test_the_ttft_figure_is_each_provider_and_regions_own() -> None:
    figures = StageProgress.ttft_figures
    # One provider and region: its figure alone; nothing before the first success.
    assert figures([_shard(0, 3, 10, 3, None)]) == ""
    assert figures([_shard(0, 5, 10, 0, 101.62)]) == "101.6 ms"
    # Two providers in one region: named by provider, never mixed into one number.
    two = [_shard(0, 5, 10, 0, 101.0, "fast"), _shard(0, 5, 10, 0, 203.0, "slow")]
    assert figures(two) == "fast 101.0, slow 203.0 ms"
    # Two regions: provider/region, as the report's rows; one not yet measured is left out.
    regions = [
        _shard(0, 5, 10, 0, 101.0, "fast", "eu"),
        _shard(0, 5, 10, 0, 120.0, "fast", "us"),
        _shard(0, 0, 10, 0, None, "slow", "eu"),
    ]
    assert figures(regions) == "fast/eu 101.0, fast/us 120.0 ms"
    many = [_shard(0, 5, 10, 0, 10.0 * i, f"p{i}") for i in range(1, 7)]
    assert figures(many) == "p1 10.0, p2 20.0, p3 30.0, p4 40.0 ms (+2 more)"


def test_parts_of_a_level_are_weighted_by_their_successes() -> None:
    assert StageProgress.weighted_median([(50.0, 2), (70.0, 4)]) == 70.0
    assert StageProgress.weighted_median([(70.0, 1), (50.0, 9)]) == 50.0
    assert StageProgress.weighted_median([(50.0, 2), (70.0, 2)]) == 50.0


def test_one_bar_per_started_stage() -> None:
    with StageProgress(_console()) as progress:
        progress.update(
            _view(
                [
                    # Ended below its cap (bounded by duration): shown complete at 8.
                    ("finished", [_shard(0, 8, 10)]),
                    ("running", [_shard(1, 3, 10, 1, 50.0), _shard(1, 4, 10, 0, 70.0)]),
                    ("planned", [_shard(2, 0, 10)]),
                ]
            )
        )
        tasks = {t.description: t for t in progress.progress.tasks}
        assert set(tasks) == {"stage 0 · concurrency 1", "stage 1 · concurrency 2"}
        finished, running = tasks["stage 0 · concurrency 1"], tasks["stage 1 · concurrency 2"]
        assert (finished.completed, finished.total) == (8, 8)
        assert finished.fields["detail"] == "errors 0 · finished"
        assert (running.completed, running.total) == (7, 20)
        # The stage's figure: the parts' medians weighted by their successful requests.
        assert running.fields["detail"] == "errors 1 · TTFT p50 70.0 ms · running"

        # The next view moves the same bars on; a stage bounded by duration has no total.
        progress.update(
            _view(
                [
                    ("finished", [_shard(0, 8, 10)]),
                    ("running", [_shard(1, 9, 10), _shard(1, 10, 10)]),
                    ("running", [_shard(2, 5, None)]),
                ]
            )
        )
        tasks = {t.description: t for t in progress.progress.tasks}
        assert len(progress.progress.tasks) == 3
        assert tasks["stage 1 · concurrency 2"].completed == 19
        assert tasks["stage 2 · concurrency 4"].total is None


def _row(provider: str, **extra: Any) -> dict[str, Any]:
    """One summary row as analytics/report/build.py builds it (the fields the renderers read)."""
    row: dict[str, Any] = {
        "provider": provider, "stage": 0, "region": "eu", "concurrency": 4, "requests": 120,
        "errors": 2, "errors_by_class": "http_429: 2", "request_rate": 3.5,
        "ttft_p50_ms": 81.0, "ttft_p90_ms": 150.0, "ttft_p95_ms": 190.0,
        "ttft_p99_ms": 240.0, "ttft_p999_ms": 300.0, "itl_p50_ms": 9.5, "itl_p99_ms": 30.0,
        "tpot_p50_ms": 10.0, "e2e_p99_ms": 1900.0, "decode_tok_s_p50": 101.0,
        "output_tok_s": 410.0, "goodput_rps": 3.1, "slo_attainment_pct": 92.0,
        "cost_per_mtok_input": 0.8, "cost_per_mtok_output": 1.2, "cost_per_1k_requests": 0.3,
        "ttft_n": 118, "low_sample": ["ttft_p99_ms", "ttft_p999_ms"],
    }  # fmt: skip
    return row | extra


def _report() -> RunReport:
    return RunReport(
        run_id="run-42",
        name="console",
        state="finished",
        shards=[
            {
                "shard_id": "s0.api.eu",
                "state": "finished",
                "message": None,
                "attempts": 1,
                "accepted_attempt": 1,
            },
            {
                "shard_id": "s0.gpu.eu",
                "state": "failed",
                "message": "no live worker",
                "attempts": 3,
                "accepted_attempt": 2,
            },
        ],
        stages=[
            _row(
                "api",
                prompt_tokens_planned_mean=100.0,
                prompt_tokens_reported_mean=104.0,
                prompt_length_error_pct=4.0,
            ),
            _row(
                "gpu",
                roofline_per_stream_tok_s=150.0,
                roofline_batch=3.8,
                roofline_aggregate_tok_s=570.0,
                roofline_bound="memory",
                efficiency_pct=67.0,
                client_bound=True,
                client_health={
                    "client_bound_reasons": ["send_lag"],
                    "client_bound_note": "p99 send lag 40.0 ms: TTFT of late requests is "
                    "measured from the actual send",
                    "loop_lag_p99_ms": 55.0,
                    "loop_cpu_util": 0.97,
                    "schedule_lag_p99_ms": 40.0,
                    "prewarmed_connections": 256,
                    "prewarm_ms": 91.6,
                },
            ),
        ],
        comparison={
            "a": "api",
            "b": "gpu",
            "rows": [
                {
                    "stage": 0,
                    "region": "eu",
                    "metric": "ttft_p50",
                    "a_ms": 80.0,
                    "b_ms": 100.0,
                    "ratio": 1.25,
                    "ci_low": 1.1,
                    "ci_high": 1.4,
                    "verdict": "gpu slower",
                }
            ],
        },
    )


def test_the_table_report_with_every_warning() -> None:
    console = _console()
    print_report(console, _report(), "table")
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "tokenbench run run-42 · console · finished" in text
    assert "TTFT latency (ms)" in text
    assert "240.0*" in text  # a percentile its sample cannot support is flagged
    assert "self-hosted vs roofline ceiling" in text and "67 %" in text
    assert "gpu vs api" in text and "1.25×" in text and "1.10–1.40" in text
    assert "Prompt tokens, planned → server-reported" in text
    assert ["api", "0", "eu", "100", "104", "+4.0", "%"] in [
        line.split() for line in text.splitlines()
    ]
    assert "client-bound: gpu stage 0 eu (send_lag): p99 send lag 40.0 ms" in " ".join(text.split())
    assert "Connections opened before the stage clock" in text
    assert ["gpu", "0", "eu", "256", "92"] in [line.split() for line in text.splitlines()]
    assert "shard s0.gpu.eu: failed: no live worker" in text
    assert "shard s0.gpu.eu ran 3 attempts; attempt 2 counted" in text
    assert "s0.api.eu" not in text  # finished at its first attempt: nothing to say


def test_every_table_fits_80_columns_with_its_figures_whole() -> None:
    console = Console(file=io.StringIO(), width=80, force_terminal=False, color_system=None)
    print_report(console, _report(), "table")
    text = console.file.getvalue()  # type: ignore[attr-defined]
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80 and "…" not in text
    # The roofline's figures and the comparison's, on their rows' lines.
    gpu = [line for line in lines if line.split()[:3] == ["gpu", "0", "eu"]]
    for figure in ("3.8", "150.0", "101.0", "67 %", "570", "410", "memory", "$1.20"):
        assert any(f" {figure}" in line for line in gpu), figure
    assert any("1.25×" in line and "1.10–1.40" in line for line in lines)


def test_json_is_the_report_itself_and_its_sections() -> None:
    console = _console()
    print_report(console, _report(), "json")
    document = json.loads(console.file.getvalue())  # type: ignore[attr-defined]
    sections = document.pop("sections")
    assert document == _report().to_dict()
    assert [s["key"] for s in sections] == [s.key for s in build_sections(_report())]


@pytest.mark.parametrize(("fmt", "render"), [("markdown", render_markdown), ("html", render_html)])
def test_markdown_and_html_are_written_raw(fmt: str, render: Any) -> None:
    console = _console()
    print_report(console, _report(), fmt)
    # Byte for byte: not wrapped, and "[...]" is not taken for console markup.
    assert console.file.getvalue() == render(_report())  # type: ignore[attr-defined]
