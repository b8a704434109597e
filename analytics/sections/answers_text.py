"""The answers (analytics/report/answers.py) as text every format writes the same way: the
capacity sentences, the sweep's curve as a table with its knee, the stages ended early.
Markdown, HTML and the terminal lay these out; the JSON report carries the raw answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from analytics.report.formatting import number

__all__ = [
    "CAPACITY_TITLE",
    "ENDED_TITLE",
    "SWEEP_TITLE",
    "TextTable",
    "capacity_lines",
    "ended_table",
    "sweep_tables",
]

CAPACITY_TITLE = "Capacity"
SWEEP_TITLE = "Sweep: latency vs throughput"
ENDED_TITLE = "Stages ended early"


@dataclass(frozen=True, slots=True)
class TextTable:
    """A table every format can draw: a caption, a header, rows of cells."""

    caption: str
    header: list[str]
    rows: list[list[str]]
    numeric: list[bool]


def capacity_lines(answers: dict[str, Any]) -> list[str]:
    """One sentence per provider and region of a capacity search."""
    return [str(entry["answer"]) for entry in answers.get("capacity") or []]


_MARKS = {"saturated": "saturated", "stopped_early": "stopped early"}


def sweep_tables(answers: dict[str, Any]) -> list[TextTable]:
    """Per provider and region of a sweep: its points in stage order, the knee marked."""
    tables = []
    for entry in answers.get("sweep") or []:
        knee = (entry.get("knee") or {}).get("stage")
        rows = [
            [
                str(p["stage"]) + (" ◆ knee" if p["stage"] == knee else ""),
                str(p["role"]),
                number(p["offered_rps"], 2),
                number(p["request_rate"], 2),
                number(p["ttft_p50_ms"]),
                number(p["ttft_p99_ms"]),
                number(p["output_tok_s"]),
                _MARKS.get(p["outcome"] or "", ""),
            ]
            for p in entry["points"]
        ]
        tables.append(
            TextTable(
                str(entry["answer"]),
                ["stage", "role", "offered req/s", "req/s", "TTFT p50", "TTFT p99", "out tok/s",
                 "ended"],
                rows,
                [False, False, True, True, True, True, True, False],
            )
        )  # fmt: skip
    return tables


def ended_table(answers: dict[str, Any]) -> TextTable | None:
    """The stages ended early (or marked), with why and the requests not sent."""
    ended = answers.get("ended") or []
    if not ended:
        return None
    rows = [
        [
            str(e["stage"]),
            str(e["provider"]),
            _MARKS.get(e["outcome"], e["outcome"]) + ("" if e["acted"] else " (marked)"),
            str(e["requests_recorded"]),
            "–" if e["requests_planned"] is None else str(e["requests_planned"]),
            "–" if e["requests_saved"] is None else str(e["requests_saved"]),
            str(e["reason"]),
        ]
        for e in ended
    ]
    saved = answers.get("requests_saved")
    caption = (
        f"{len(ended)} stage(s) ended early or marked"
        + (f"; {saved:,} planned requests not sent" if saved else "")
        + " (docs/answers.md)"
    )
    return TextTable(
        caption,
        ["stage", "provider", "ended", "requests", "planned", "saved", "why"],
        rows,
        [True, False, False, True, True, True, False],
    )
