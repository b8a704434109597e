from __future__ import annotations

from typing import Any

from analytics.sections.answers import capacity, sweep
from analytics.sections.model import SectionOptions
from tests.support.sample_report import report

POINT = {"stage": 0, "role": "level", "offered_rps": 2.0, "request_rate": 1.9, "ttft_p50_ms": 80.0,
         "ttft_p99_ms": 120.0, "output_tok_s": 100.0, "outcome": None}  # fmt: skip
ANSWERS: dict[str, Any] = {
    "capacity": [{"answer": "gpu · eu: holds 7.5 req/s"}],
    "sweep": [{"answer": "gpu · eu: knee at stage 1", "knee": {"stage": 1},
               "points": [POINT, POINT | {"stage": 1, "outcome": "saturated"}]}],
    "ended": [{"stage": 1, "provider": "gpu", "outcome": "saturated", "acted": True,
               "requests_recorded": 40, "requests_planned": 100, "requests_saved": 60,
               "reason": "p99 over the SLO"}],
    "requests_saved": 60,
    "notes": "one note",
}  # fmt: skip


def test_the_capacity_sentences_are_lines() -> None:
    (section,) = capacity(report(answers=ANSWERS), SectionOptions())
    assert section.lines == ("gpu · eu: holds 7.5 req/s",) and not section.is_table
    assert capacity(report(), SectionOptions()) == []


def test_the_sweep_the_ended_stages_and_the_note() -> None:
    curve, ended, note = sweep(report(answers=ANSWERS), SectionOptions())
    assert curve.lead == "gpu · eu: knee at stage 1"
    assert curve.text_rows()[1][0] == "1 ◆ knee" and curve.text_rows()[1][-1] == "saturated"
    assert ended.key == "ended" and ended.text_rows()[0][-1] == "p99 over the SLO"
    assert "60 planned requests not sent" in ended.lead
    assert note.lines == ("one note",) and not note.title
    assert sweep(report(), SectionOptions()) == []
