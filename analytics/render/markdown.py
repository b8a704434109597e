"""The report as GitHub-flavoured markdown (for pull requests, issues, notebooks)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from analytics.datasets.fingerprint import dataset_line
from analytics.render.answers_text import (
    CAPACITY_TITLE,
    ENDED_TITLE,
    SWEEP_TITLE,
    capacity_lines,
    ended_table,
    sweep_tables,
)
from analytics.report.build import RunReport
from analytics.report.columns import columns
from analytics.report.failover import failover_sections
from analytics.report.formatting import (
    CAPTION,
    LOW_SAMPLE_NOTE,
    PERCENTILE_HEADER,
    PERCENTILE_KEYS,
    method_note,
    money,
    number,
    percentile_rows,
)
from analytics.report.sessions import (
    ENDS_HEADER,
    ENDS_TITLE,
    TURNS_HEADER,
    TURNS_NOTE,
    TURNS_TITLE,
    end_rows,
    turn_rows,
)
from analytics.report.top_errors import ERRORS_HEADER, ERRORS_NOTE, ERRORS_TITLE, error_rows
from analytics.telemetry.metrics import (
    TELEMETRY_HEADER,
    TELEMETRY_NOTE,
    TELEMETRY_NUMERIC,
    TELEMETRY_TITLE,
    telemetry_rows,
)


def _escape(text: str) -> str:
    # Cells hold text others wrote (names, servers' error messages): a viewer that renders
    # markdown must show ``<id>`` or a tag as text, not take it for HTML.
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("|", "\\|").replace("\n", " ")


def table(header: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[bool]) -> str:
    """A markdown table; numeric columns right-aligned."""
    lines = [
        "| " + " | ".join(_escape(h) for h in header) + " |",
        "|" + "|".join("---:" if n else "---" for n in numeric) + "|",
    ]
    lines += ["| " + " | ".join(_escape(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def comparison_lines(comparison: dict[str, Any] | None) -> list[str]:
    """Verdict bullets of a comparison, if any."""
    if not comparison:
        return []
    lines = [f"## Comparison: {comparison['b']} vs {comparison['a']}", ""]
    for row in comparison["rows"]:
        where = f"stage {row['stage']}, {row['region']}"
        lines.append(f"- {where}: {row['verdict']}")
    if not comparison["rows"]:
        lines.append("- nothing in common to compare")
    return [*lines, ""]


def failover_lines(report: RunReport) -> list[str]:
    """The failover sections (none without upstreams)."""
    out: list[str] = []
    for section in failover_sections(report.failover, report.upstreams, report.upstream_logs):
        out += [f"## {section.title}", "", table(section.header, section.rows, section.numeric), ""]
        if section.note:
            out += [f"_{section.note}_", ""]
    return out


def answer_sections(report: RunReport) -> tuple[list[str], list[str]]:
    """The answers as markdown: what heads the report (capacity), and what follows the
    summary (the sweep's curve, the stages ended early)."""
    head: list[str] = []
    if lines := capacity_lines(report.answers):
        head += [f"## {CAPACITY_TITLE}", "", *(f"- {_escape(line)}" for line in lines), ""]
    tail: list[str] = []
    for sweep in sweep_tables(report.answers):
        tail += [f"## {SWEEP_TITLE}", "", _escape(sweep.caption), ""]
        tail += [table(sweep.header, sweep.rows, sweep.numeric), ""]
    ended = ended_table(report.answers)
    if ended is not None:
        tail += [f"## {ENDED_TITLE}", "", _escape(ended.caption), ""]
        tail += [table(ended.header, ended.rows, ended.numeric), ""]
    if note := report.answers.get("notes"):
        tail += [f"_{_escape(note)}_", ""]
    return head, tail


def render_markdown(report: RunReport) -> str:
    """The whole report as markdown."""
    out = [f"# tokenbench run {report.run_id} · {report.name} · {report.state}", ""]
    head, tail = answer_sections(report)
    out += head
    summary = columns("summary")
    out.append(
        table(
            [c.title(interval=True) for c in summary],
            [[c.text(row, interval=True) for c in summary] for row in report.stages],
            [c.numeric for c in summary],
        )
    )
    out += ["", f"_{CAPTION}_", "", *tail]
    out += ["## Latency percentiles, mean and standard deviation (ms)", ""]
    out.append(
        table(
            PERCENTILE_HEADER,
            percentile_rows(report.stages),
            [False] * PERCENTILE_KEYS + [True] * (len(PERCENTILE_HEADER) - PERCENTILE_KEYS),
        )
    )
    out += ["", LOW_SAMPLE_NOTE, ""]
    if note := method_note(report.percentiles):
        out += [note, ""]
    if report.dataset is not None:
        out += [_escape(dataset_line(report.dataset)), ""]
    if report.errors:
        out += [f"## {ERRORS_TITLE}", ""]
        out.append(table(ERRORS_HEADER, error_rows(report.errors, report.stages), [False] * 6))
        out += ["", ERRORS_NOTE, ""]
    if report.session_turns:
        out += [f"## {TURNS_TITLE}", ""]
        numeric = [False, True, False] + [True] * (len(TURNS_HEADER) - 3)
        out.append(table(TURNS_HEADER, turn_rows(report.session_turns), numeric))
        out += ["", f"_{TURNS_NOTE}_", ""]
    if report.sessions:
        out += [f"## {ENDS_TITLE}", ""]
        numeric = [False, True, False] + [True] * (len(ENDS_HEADER) - 3)
        out.append(table(ENDS_HEADER, end_rows(report.sessions), numeric))
        out.append("")
    if telemetry := telemetry_rows(report.server_metrics):
        out += [f"## {TELEMETRY_TITLE}", ""]
        out.append(table(TELEMETRY_HEADER, telemetry, TELEMETRY_NUMERIC))
        out += ["", TELEMETRY_NOTE, ""]
    out += failover_lines(report)
    out += comparison_lines(report.comparison)
    if report.pareto:
        out += ["## Cost vs p99 TTFT", ""]
        out.append(
            table(
                ["provider", "stage", "region", "$/1M out", "TTFT p99", "Pareto-optimal"],
                [
                    [
                        p["provider"],
                        str(p["stage"]),
                        p["region"],
                        money(p["cost_per_mtok_output"]),
                        number(p["ttft_p99_ms"]) + ("*" if p["ttft_p99_low_sample"] else ""),
                        "yes" if p["pareto"] else "",
                    ]
                    for p in report.pareto
                ],
                [False, True, False, True, True, False],
            )
        )
        out.append("")
    return "\n".join(out)
