from __future__ import annotations

from analytics.sections.client import client_health, shards
from analytics.sections.model import SectionOptions
from tests.support.sample_report import report, stage_row

HEALTH = {"client_bound_reasons": ["send_lag"], "client_bound_note": "p99 send lag 40.0 ms",
          "prewarmed_connections": 256, "prewarm_ms": 91.6}  # fmt: skip


def test_pre_warmed_connections_and_client_bound_stages() -> None:
    stages = [stage_row("api"), stage_row("gpu", client_bound=True, client_health=HEALTH)]
    prewarm, bound = client_health(report(stages=stages), SectionOptions())
    assert prewarm.text_rows() == [["gpu", "0", "eu", "256", "92"]]
    assert bound.warning and bound.lines == (
        "client-bound: gpu stage 0 eu (send_lag): p99 send lag 40.0 ms (docs/load.md)",
    )
    assert client_health(report(), SectionOptions()) == []


def test_shards_that_failed_or_ran_again() -> None:
    done = {"shard_id": "s0.a", "state": "finished", "message": None, "attempts": 1,
            "accepted_attempt": 1}  # fmt: skip
    failed = done | {"shard_id": "s0.b", "state": "failed", "message": "no live worker",
                     "attempts": 3, "accepted_attempt": 2}  # fmt: skip
    (section,) = shards(report(shards=[done, failed]), SectionOptions())
    assert section.lines == (
        "shard s0.b: failed: no live worker",
        "shard s0.b ran 3 attempts; attempt 2 counted",
    )
    assert shards(report(shards=[done]), SectionOptions()) == []
