from __future__ import annotations

from analytics.sections.model import SectionOptions
from analytics.sections.sessions import sessions
from tests.support.sample_report import report

TURN = {"provider": "a", "stage": 0, "region": "eu", "turn": 2, "requests": 1200, "ok": 1100,
        "ttft_p50_ms": 20.0, "ttft_p99_ms": 31.25, "itl_p50_ms": None,
        "context_tokens_mean": 27.5, "prompt_tokens_mean": 1234.0}  # fmt: skip
END = {"provider": "a", "stage": 0, "region": "eu", "sessions": 3, "turns_mean": 2.0,
       "turns_planned_mean": 8 / 3, "ended_done": 1, "ended_error": 1, "ended_context_cap": 1,
       "ended_stage_end": 0, "unended": 2}  # fmt: skip


def test_turns_and_ends_as_the_text_formats_write_them() -> None:
    turns, ends = sessions(report(session_turns=[TURN], sessions=[END]), SectionOptions())
    assert turns.text_rows() == [
        ["a", "0", "eu", "2", "1,200", "1,100", "20.0", "31.2", "–", "28", "1,234"]
    ]
    # Sessions stopped while waiting for their next turn count under "stage end".
    assert ends.text_rows() == [["a", "0", "eu", "3", "2.00", "2.67", "1", "1", "1", "2"]]
    assert [c.name for c in turns.columns if c.key] == ["provider", "stage", "region", "turn"]
    assert sessions(report(), SectionOptions()) == []
