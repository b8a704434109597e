"""The simulator's bounded request log: pages after a cursor, what was dropped."""

from __future__ import annotations

import orjson

from workers.simulator.request_log import RequestLog


def _fill(log: RequestLog, count: int) -> None:
    for i in range(count):
        log.add(1_000 + i, f"tokenbench.s0.p.r.1.{i}", f"h{i}", 200, "ok")


def test_pages_follow_the_cursor() -> None:
    log = RequestLog(100)
    _fill(log, 5)
    page = log.page(0, limit=2)
    assert [e["seq"] for e in page["entries"]] == [1, 2]
    assert page["entries"][0] == {
        "seq": 1,
        "received_at_ns": 1_000,
        "request_id": "tokenbench.s0.p.r.1.0",
        "prompt_hash": "h0",
        "status": 200,
        "outcome": "ok",
        "stall_ms": 0.0,
    }
    assert [e["seq"] for e in log.page(2)["entries"]] == [3, 4, 5]
    assert log.page(5)["entries"] == []
    assert (page["last"], page["oldest"], page["started_at_ns"]) == (5, 1, 1_000)


def test_the_oldest_entries_are_dropped_beyond_capacity() -> None:
    log = RequestLog(3)
    _fill(log, 10)
    page = log.page(0)
    assert [e["seq"] for e in page["entries"]] == [8, 9, 10]
    assert (page["oldest"], page["last"]) == (8, 10)  # a reader at 0 missed 7
    assert [e["seq"] for e in log.page(8)["entries"]] == [9, 10]


def test_a_log_of_no_entries_still_counts_and_times() -> None:
    log = RequestLog(0)
    _fill(log, 2)
    page = orjson.loads(log.page_json(0))
    assert page["entries"] == [] and page["started_at_ns"] == 1_000
    assert (page["last"], page["oldest"]) == (2, 3)
