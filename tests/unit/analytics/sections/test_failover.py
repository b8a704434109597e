from __future__ import annotations

from analytics.sections.failover import failover
from analytics.sections.model import SectionOptions
from tests.support.sample_report import report

LOG = {"upstream": "up-a", "port": 9101, "entries": 6, "unmatched": 1, "missed": 3}


def test_only_the_tables_with_rows_keyed_by_their_first_columns() -> None:
    (logs,) = failover(report(upstream_logs=[LOG]), SectionOptions())
    assert logs.key == "upstream-logs" and logs.title == "Upstream logs"
    assert logs.text_rows() == [["up-a", "9101", "6", "1", "3"]]
    assert [c.name for c in logs.columns if c.key] == ["upstream"]
    assert failover(report(), SectionOptions()) == []
