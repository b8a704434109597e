"""The client-bound rule (what distorts the figures, and by how much) and the health
monitor's figures (docs/load.md, "The client-bound rule")."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

import pytest

from scenarios.load.client_bound import (
    MERGED_SHARE_MAX,
    NOT_SENT_SHARE_MAX,
    SEND_LAG_P99_MS_MAX,
    SEND_LAG_SHARE_MAX,
    ClientHealth,
    client_bound_note,
    client_bound_reasons,
    is_client_bound,
)
from workers.client.errors import ErrorClass, RequestFailure
from workers.client.result import RequestResult
from workers.shard.health import ShardHealth, percentile
from workers.shard.spans import Spans

CLOSED = ClientHealth(
    load_kind="closed",
    loop_lag_p99_ms=1.0,
    loop_cpu_util=0.3,
    schedule_lag_p99_ms=2.0,
    send_lag_p99_ms=2.0,
    send_lag_share=0.001,
    requests_sent=200,
    token_events=12_800,
    first_tokens=200,
)
OPEN = replace(CLOSED, load_kind="open", send_lag_share=0.0, scheduled_rps=50.0, achieved_rps=49.9)


@pytest.mark.parametrize("healthy", [CLOSED, OPEN])
def test_a_healthy_client_is_not_client_bound(healthy: ClientHealth) -> None:
    assert client_bound_reasons(healthy) == []
    assert not is_client_bound(healthy)
    assert client_bound_note(healthy) == ""


@pytest.mark.parametrize("healthy", [CLOSED, OPEN])
def test_loop_lag_and_cpu_alone_are_no_reason_with_kernel_stamps(healthy: ClientHealth) -> None:
    # The demo's stage 3: a loop late by 150 ms at p99, stamps from the kernel, no merges.
    busy = replace(healthy, loop_lag_p99_ms=150.0, loop_cpu_util=0.97, schedule_lag_p99_ms=12.0)
    assert client_bound_reasons(busy) == []


@pytest.mark.parametrize(
    ("base", "change", "reason"),
    [
        (OPEN, {"send_lag_p99_ms": 35.0}, "send_lag"),
        (CLOSED, {"send_lag_share": 0.08}, "send_lag"),
        (OPEN, {"achieved_rps": 45.0}, "rate"),
        (OPEN, {"not_sent": 20, "cap_waits": 60}, "not_sent"),
        (CLOSED, {"merged_tokens": 400}, "read_lag"),
        (CLOSED, {"merged_tokens": 1, "ttft_tail": 2, "merged_ttft_tail": 1}, "read_lag"),
        (CLOSED, {"kernel_stamps": False, "loop_lag_p99_ms": 15.0}, "read_lag"),
    ],
)
def test_each_distortion_flags_the_shard(
    base: ClientHealth, change: dict[str, object], reason: str
) -> None:
    assert client_bound_reasons(replace(base, **change)) == [reason]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("base", "change"),
    [
        (OPEN, {"send_lag_p99_ms": SEND_LAG_P99_MS_MAX}),
        (CLOSED, {"send_lag_p99_ms": 80.0, "send_lag_share": SEND_LAG_SHARE_MAX}),
        (OPEN, {"achieved_rps": 47.6}),
        (OPEN, {"not_sent": 2, "cap_waits": 30}),  # 2 of 202: under 1 %
        (CLOSED, {"merged_tokens": int(MERGED_SHARE_MAX * 12_800)}),
        (CLOSED, {"merged_first_tokens": 9, "merged_tokens": 9, "ttft_tail": 2}),  # not in it
        (CLOSED, {"merged_tokens": 2, "ttft_tail": 20, "merged_ttft_tail": 2}),  # a tenth
        (CLOSED, {"kernel_stamps": False, "loop_lag_p99_ms": 9.0}),
    ],
)
def test_up_to_each_threshold_no_flag(base: ClientHealth, change: dict[str, object]) -> None:
    assert client_bound_reasons(replace(base, **change)) == []  # type: ignore[arg-type]


def test_a_max_in_flight_cap_explains_lag_and_shortfall_but_not_arrivals_never_sent() -> None:
    capped = replace(
        OPEN, schedule_lag_p99_ms=2000.0, scheduled_rps=20.0, achieved_rps=12.0, cap_waits=40
    )
    assert client_bound_reasons(capped) == []  # waits are the user's choice, TTFT from intent
    dropped = replace(capped, requests_sent=120, not_sent=80)
    assert client_bound_reasons(dropped) == ["not_sent"]
    assert NOT_SENT_SHARE_MAX < dropped.not_sent_share == 0.4


def test_the_note_states_the_expected_error() -> None:
    late = replace(OPEN, send_lag_p99_ms=35.2, scheduled_rps=50.0, achieved_rps=48.5)
    assert client_bound_note(late) == (
        "p99 send lag 35 ms: TTFT and E2E from intent include up to 35 ms of the client's "
        "own delay (timed from the actual send they do not), rates are lower than planned "
        "by 3%"
    )
    on_rate = replace(late, achieved_rps=50.0)
    assert client_bound_note(on_rate).endswith("(timed from the actual send they do not)")
    slow = replace(late, achieved_rps=40.0)
    assert "sent 40.0 of 50.0 req/s scheduled: rates are lower than planned by 20%" in (
        client_bound_note(slow)
    )
    dropped = replace(OPEN, requests_sent=30, not_sent=370, cap_waits=30)
    assert client_bound_note(dropped) == (
        "370 of 400 arrivals not sent (max_in_flight still full when the stage ended): "
        "rates are lower than planned by 92%"
    )
    merged = replace(CLOSED, merged_tokens=256, merge_error_p99_ms=44.4)
    assert client_bound_note(merged) == (
        "reads waited out a stall of the client, so the kernel merged writes under the "
        "later stamp: 2.0% of token stamps took a later token's arrival (ITL p99 off by up "
        "to 44 ms)"
    )
    first = replace(merged, ttft_tail=2, merged_ttft_tail=1, merge_error_ttft_ms=27.3)
    assert client_bound_note(first).endswith(
        "(ITL p99 off by up to 44 ms) and 1 of the 2 first tokens at or above the TTFT p99 "
        "took the next token's arrival (TTFT p99 off by up to 27 ms)"
    )
    users = replace(CLOSED, send_lag_share=0.12, send_lag_p99_ms=60.0)
    assert client_bound_note(users).startswith(
        "virtual users waited 12% of their time for the client to send (p99 60 ms)"
    )
    read_times = replace(CLOSED, kernel_stamps=False, loop_lag_p99_ms=18.0)
    assert "late by up to 18 ms" in client_bound_note(read_times)


def test_a_stage_is_judged_on_its_shards_combined() -> None:
    quiet = replace(OPEN, merged_tokens=0, achieved_rps=25.0, scheduled_rps=25.0)
    merging = replace(quiet, merged_tokens=300, send_lag_p99_ms=30.0)
    stage = ClientHealth.combine([quiet, merging])
    assert stage.token_events == 25_600 and stage.merged_tokens == 300
    assert stage.send_lag_p99_ms == 30.0  # the worst part's p99 bounds the stage's
    assert stage.scheduled_rps == 50.0 and stage.achieved_rps == 50.0
    # 300 of 25,600 stamps is 1.2 %: above the threshold for the stage as for the shard.
    assert client_bound_reasons(stage) == ["send_lag", "read_lag"]
    assert ClientHealth.combine([]) == ClientHealth()


def test_from_event_fields_as_redis_returns_them() -> None:
    fields = {
        "load_kind": "open",
        "loop_lag_p99_ms": "12.5",
        "loop_cpu_util": "0.4",
        "send_lag_p99_ms": "31",
        "scheduled_rps": "50",
        "achieved_rps": "49.9",
        "cap_waits": "0",
        "requests_sent": "100",
        "token_events": "6400",
        "merged_tokens": "12",
        "kernel_stamps": "1",
    }
    health = ClientHealth.from_fields(fields)
    assert health.loop_lag_p99_ms == 12.5 and health.achieved_rps == 49.9
    assert health.open_loop and health.kernel_stamps and health.merged_tokens == 12
    assert client_bound_reasons(health) == ["send_lag"]
    # A shard stored before these figures existed: healthy, kernel stamps assumed.
    old = ClientHealth.from_fields({"loop_lag_p99_ms": "42", "loop_cpu_util": "0.97"})
    assert old.kernel_stamps and client_bound_reasons(old) == []
    assert not ClientHealth.from_fields({"kernel_stamps": "0"}).kernel_stamps


def test_percentile_matches_numpy_linear() -> None:
    np = pytest.importorskip("numpy")
    values = [5, 1, 9, 3, 7, 2, 8]
    for q in (0.0, 0.5, 0.9, 0.99, 1.0):
        assert percentile(values, q) == pytest.approx(float(np.percentile(values, q * 100)))
    assert percentile([], 0.5) == 0.0


MS = 1_000_000


def _result(sent: int, stamps: list[int]) -> RequestResult:
    return RequestResult(intended_start=sent, sent=sent, end=stamps[-1], token_stamps=stamps)


def _merging_shard() -> ShardHealth:
    health = ShardHealth(kernel_stamps=True)
    # Tokens every 10 ms; three of them read together at 1075 ms.
    health.add(_result(900 * MS, [1040 * MS, 1050 * MS, 1075 * MS, 1075 * MS, 1075 * MS]))
    # A server that wrote two events at once, much later.
    health.add(_result(1100 * MS, [1200 * MS, 1200 * MS, 1210 * MS]))
    # A first token read together with the second one at 1070 ms: TTFT too.
    health.add(_result(990 * MS, [1070 * MS, 1070 * MS, 1090 * MS]))
    return health


def test_shared_stamps_in_a_read_stall_count_as_the_clients() -> None:
    health = _merging_shard()
    ttfts = health.ttfts_ns
    assert health.token_events == 11 and len(ttfts) == 3
    assert (ttfts.min, ttfts.max) == (80 * MS, 140 * MS)
    assert len(health.merges) == 4
    # The probe ran at 1000 ms, then woke 60 ms late; no socket was read from 1002 to 1080.
    health.late_windows = Spans([(1000 * MS, 1080 * MS)])
    health.read_gaps = Spans([(1002 * MS, 1080 * MS), (1130 * MS, 1200 * MS)])
    assert health.read_stalls() == [(1002 * MS, 1080 * MS, 78 * MS)]
    merges = health.client_merges()
    assert [(m.stamp // MS, bound // MS, m.ttft_ns) for m, bound in merges] == [
        (1075, 25, None),  # the gap it closed (since 1050) is shorter than the stall
        (1075, 25, None),
        (1070, 78, 80 * MS),  # a first token: since the send 80 ms, the stall 78 ms
    ]


def test_a_merged_first_token_counts_for_ttft_only_in_the_tail_that_sets_the_p99() -> None:
    async def measured() -> ShardHealth:
        health = ShardHealth(kernel_stamps=True)
        async with health:
            pass
        return health

    health = asyncio.run(measured())
    health.late_windows = Spans([(1000 * MS, 1080 * MS)])
    health.read_gaps = Spans([(1002 * MS, 1080 * MS)])
    for sent in range(900, 930):  # thirty streams, first tokens after 100 ms, none merged
        health.add(_result(sent * MS, [(sent + 100 + 10 * i) * MS for i in range(5)]))
    # The first token of the slowest request, read with the second one after the stall.
    health.add(_result(900 * MS, [1070 * MS, 1070 * MS, 1090 * MS]))
    summary = health.summary()
    assert summary["first_tokens"] == 31 and summary["ttft_tail"] == 1
    assert summary["merged_ttft_tail"] == 1 and summary["merge_error_ttft_ms"] == 78.0
    assert summary["client_bound_reasons"] == "read_lag"
    # 1 of 153 token stamps merged: the ITL p99 is spared, the note names TTFT alone.
    assert "ITL" not in str(summary["client_bound_note"])
    assert str(summary["client_bound_note"]).endswith("(TTFT p99 off by up to 78 ms)")
    # The same merge on a fast first token leaves the TTFT p99 alone.
    fast = asyncio.run(measured())
    fast.late_windows, fast.read_gaps = health.late_windows, health.read_gaps
    for sent in range(900, 930):
        fast.add(_result(sent * MS, [(sent + 100 + 10 * i) * MS for i in range(5)]))
    fast.add(_result(980 * MS, [1070 * MS, 1070 * MS, 1090 * MS]))  # TTFT 90 ms
    assert fast.summary()["client_bound"] == 0


def test_users_waiting_for_the_client_count_on_successful_requests_only() -> None:
    async def measured() -> ShardHealth:
        health = ShardHealth(kernel_stamps=True)
        async with health:
            pass
        return health

    refused = RequestFailure(ErrorClass.CONNECT, "connection refused")
    health = asyncio.run(measured())
    for start in range(0, 100, 2):  # refused in 0.1 ms, the next sent 0.05 ms later
        health.add(
            RequestResult(
                start * MS, sent=start * MS + 50_000, end=start * MS + 150_000, failure=refused
            )
        )
    # Every request failed at once: no throughput to understate, however the times compare.
    assert health.summary()["send_lag_share"] == 0.0
    assert health.summary()["client_bound"] == 0
    # Successful requests of 100 ms, each sent 10 ms after its user's slot freed: 9 %.
    for freed in range(0, 1100, 110):
        sent = (freed + 10) * MS
        stamps = [sent + 50 * MS, sent + 100 * MS]
        health.add(RequestResult(freed * MS, sent=sent, end=stamps[-1], token_stamps=stamps))
    summary = health.summary()
    assert summary["send_lag_share"] == pytest.approx(10 / 110, abs=1e-3)
    assert summary["client_bound_reasons"] == "send_lag"


def test_a_busy_loop_that_kept_reading_and_an_idle_one_cause_no_merge() -> None:
    health = _merging_shard()
    # Late windows but reads every millisecond throughout (the transport's sweeps).
    health.late_windows = Spans([(1000 * MS, 1080 * MS), (1180 * MS, 1205 * MS)])
    health.read_gaps = Spans([])
    assert health.client_merges() == []
    # Stretches without reads but the probe on time: an idle loop, no bytes waiting.
    health.late_windows = Spans([])
    health.read_gaps = Spans([(1002 * MS, 1080 * MS), (1130 * MS, 1200 * MS)])
    assert health.client_merges() == []


def test_a_stall_shorter_than_the_streams_cadence_is_the_servers_burst() -> None:
    health = ShardHealth(kernel_stamps=True)
    # 30 ms between tokens; two arrive together in a 12 ms read stall: written together.
    health.add(_result(0, [100 * MS, 130 * MS, 160 * MS, 160 * MS, 220 * MS]))
    health.late_windows = Spans([(150 * MS, 162 * MS)])
    health.read_gaps = Spans([(150 * MS, 162 * MS)])
    assert len(health.merges) == 1 and health.client_merges() == []
    health.late_windows = Spans([(120 * MS, 162 * MS)])
    health.read_gaps = Spans([(125 * MS, 162 * MS)])  # 37 ms: long enough to keep two apart
    assert len(health.client_merges()) == 1


def test_a_blocked_loop_shows_as_loop_lag_and_a_stall() -> None:
    async def main() -> dict[str, str | int | float]:
        health = ShardHealth()
        async with health:
            await asyncio.sleep(0.1)
            time.sleep(0.08)  # noqa: ASYNC251 - the loop is blocked: the probe wakes ~80 ms late
            await asyncio.sleep(0.1)
        later = time.perf_counter_ns() + 10_000 * MS  # far from any stall of this run
        health.add(_result(later - 50 * MS, [later, later]))
        return health.summary()

    summary = asyncio.run(main())
    assert float(summary["loop_lag_max_ms"]) >= 50
    assert int(summary["loop_stalls"]) >= 1  # a late window; no reads were due in it
    assert summary["loop_cpu_util"] != -1.0
    assert "target_rps" not in summary
    # A merge long after the stall is a server's write, not the client's.
    assert summary["shared_stamps"] == 1 and summary["merged_tokens"] == 0
    assert summary["client_bound"] == 0 and summary["client_bound_note"] == ""
