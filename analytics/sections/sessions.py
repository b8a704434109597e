"""Multi-turn sessions (analytics/report/sessions.py, docs/workloads.md): figures by turn index
and how sessions ended; none for a run without sessions."""

from __future__ import annotations

from typing import TYPE_CHECKING

from analytics.report.sessions import ENDS_TITLE, TURNS_NOTE, TURNS_TITLE
from analytics.sections.model import WHERE, Column, Section, SectionOptions
from analytics.sections.registry import section

if TYPE_CHECKING:
    from analytics.report.build import RunReport

TURNS = (
    *WHERE,
    Column("turn", "int", key=True),
    Column("n", "int"),
    Column("ok", "int"),
    Column("TTFT p50", "ms", "ms", label="TTFT\np50"),
    Column("TTFT p99", "ms", "ms", label="TTFT\np99"),
    Column("ITL p50", "ms", "ms", digits=2, label="ITL\np50"),
    Column("context tok", "tokens", "tokens", digits=0, label="context\ntok"),
    Column("prompt tok", "tokens", "tokens", digits=0, label="prompt\ntok"),
)
ENDS = (
    *WHERE,
    Column("sessions", "int"),
    Column("turns mean", "float", digits=2, label="turns\nmean"),
    Column("planned mean", "float", digits=2, label="planned\nmean"),
    Column("done", "int"),
    Column("error", "int"),
    Column("context cap", "int", label="context\ncap"),
    Column("stage end", "int", label="stage\nend"),
)


@section(order=60)
def sessions(report: RunReport, options: SectionOptions) -> list[Section]:
    """By turn, then how sessions ended (sessions stopped while waiting for their next
    turn count under ``stage end``)."""
    out = []
    if report.session_turns:
        rows = tuple(
            (
                t["provider"], t["stage"], t["region"], t["turn"], t["requests"], t["ok"],
                t["ttft_p50_ms"], t["ttft_p99_ms"], t["itl_p50_ms"], t["context_tokens_mean"],
                t["prompt_tokens_mean"],
            )
            for t in report.session_turns
        )  # fmt: skip
        out.append(Section("sessions", TURNS_TITLE, TURNS, rows, TURNS_NOTE))
    if report.sessions:
        ends = tuple(
            (
                e["provider"], e["stage"], e["region"], e["sessions"], e["turns_mean"],
                e["turns_planned_mean"], e["ended_done"], e["ended_error"],
                e["ended_context_cap"], e["ended_stage_end"] + e["unended"],
            )
            for e in report.sessions
        )  # fmt: skip
        out.append(Section("session-ends", ENDS_TITLE, ENDS, ends))
    return out
