"""The session runner over both loops, against a fake send (no HTTP): turn order, when
each later turn is intended, why sessions end, and what the loops report."""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

from scenarios.wire.contract import ShardRate, ShardSpec
from scenarios.workload.spec import Workload
from workers.client.errors import ErrorClass, RequestFailure
from workers.client.result import AnswerText, RequestResult
from workers.load.closed_loop import ClosedLoop, RequestSource
from workers.load.open_loop import OpenLoop
from workers.load.session_plans import PlannedSession
from workers.load.sessions import SessionLoad, SessionRunner, build_session_load
from workers.load.shapes import rate_figures
from workers.prompts.plan import PlannedRequest, WordPrompts

MS = 1_000_000


def _plan(turns: int = 3, gap_ns: int = 2 * MS, captured: bool = False) -> Any:
    def plan(session: int) -> PlannedSession:
        def turn(t: int) -> PlannedRequest:
            return PlannedRequest(session * 100 + t, 10, 4, f"s{session} t{t}")

        return PlannedSession(session, turns, (gap_ns,) * (turns - 1), turn, captured)

    return plan


class Fake:
    """Answers each turn after ``answer_ns``; fails the turns listed in ``fail``."""

    def __init__(self, answer_ns: int = MS, fail: tuple[tuple[int, int], ...] = ()) -> None:
        self.answer_ns = answer_ns
        self.fail = fail
        self.records: list[tuple[PlannedRequest, RequestResult]] = []

    async def send(self, request: PlannedRequest, intended: int) -> RequestResult:
        assert request.session is not None
        sent = max(time.perf_counter_ns(), intended)
        await asyncio.sleep(self.answer_ns / 1e9)
        result = RequestResult(intended, sent=sent, end=time.perf_counter_ns())
        result.completion_tokens, result.token_count_source = 4, "usage"
        if (request.session.session_id, request.session.turn) in self.fail:
            result.failure = RequestFailure(ErrorClass.HTTP_5XX, "boom", 500)
        elif request.session.answer_chars:
            result.answer = AnswerText(request.session.answer_chars)
            result.answer.add(f"answer to {request.prompt}")
        return result

    def record(self, request: PlannedRequest, result: RequestResult) -> None:
        self.records.append((request, result))

    def by_session(self) -> dict[int, list[tuple[PlannedRequest, RequestResult]]]:
        out: dict[int, list[tuple[PlannedRequest, RequestResult]]] = {}
        for request, result in self.records:
            assert request.session is not None
            out.setdefault(request.session.session_id, []).append((request, result))
        return out


def _closed(
    plan: Any, sessions: int, cap: int = 10_000, duration_s: float | None = None
) -> SessionLoad:
    source = RequestSource(plan, 0, sessions, duration_s)
    runner = SessionRunner(cap, WordPrompts(), duration_s)
    return SessionLoad(ClosedLoop(2, source, duration_s), runner, duration_s)


def test_turns_run_in_order_each_intended_after_the_answer_and_its_think_time() -> None:
    fake, load = Fake(fail=((1, 2),)), _closed(_plan(), 3)
    asyncio.run(load.run(fake.send, fake.record))
    sessions = fake.by_session()
    assert sorted(sessions) == [0, 1, 2]
    ends = {s: [r.session.end for r, _ in turns if r.session] for s, turns in sessions.items()}
    assert ends == {0: [None, None, "done"], 1: [None, "error"], 2: [None, None, "done"]}
    for turns in sessions.values():
        assert [r.session.turn for r, _ in turns if r.session] == list(range(1, len(turns) + 1))
        for (_, earlier), (later, result) in itertools.pairwise(turns):
            assert result.intended_start == (earlier.end or 0) + 2 * MS  # end + think time
            assert later.messages is not None and later.messages[-2][0] == "assistant"
    assert len(load.intended) == len(fake.records) == 8
    latest = max(result.intended_start for _, result in fake.records)
    assert load.kind == "closed" and load.planned_end_ns() == latest


def test_a_captured_gap_counts_from_the_earlier_turns_intent_but_waits_for_its_answer() -> None:
    # The answer takes at least 5 ms: a 1 ms gap is overtaken by it.
    for gap in (1 * MS, 50 * MS):
        fake = Fake(answer_ns=5 * MS)
        load = _closed(_plan(turns=2, gap_ns=gap, captured=True), 1)
        asyncio.run(load.run(fake.send, fake.record))
        (_, first), (_, second) = fake.records
        assert second.intended_start == max(first.end or 0, first.intended_start + gap)
        if gap == 1 * MS:
            assert second.intended_start == first.end


def test_a_replayed_session_goes_on_after_a_failed_turn() -> None:
    fake = Fake(fail=((0, 1),))
    asyncio.run(_closed(_plan(turns=3, gap_ns=MS, captured=True), 1).run(fake.send, fake.record))
    turns = [(r.session.turn, r.session.end, res.ok) for r, res in fake.records if r.session]
    assert turns == [(1, None, False), (2, None, True), (3, "done", True)]


def test_the_cap_and_the_stage_end_end_sessions() -> None:
    fake = Fake()
    # Turn 2 needs 14 tokens of context + 10 + 4 > 20.
    asyncio.run(_closed(_plan(), 1, cap=20).run(fake.send, fake.record))
    assert [r.session.end for r, _ in fake.records if r.session] == ["context_cap"]
    fake = Fake()
    # A think time past the stage's end: the session ends instead of waiting for it.
    load = _closed(_plan(gap_ns=100_000 * MS), 1, duration_s=30)
    asyncio.run(load.run(fake.send, fake.record))
    assert [r.session.end for r, _ in fake.records if r.session] == ["stage_end"]
    assert load.planned_end_ns() == load.start_ns + 30_000 * MS


def test_a_cancelled_turn_stops_the_load() -> None:
    fake = Fake()

    async def cancelled(request: PlannedRequest, intended: int) -> RequestResult:
        result = await fake.send(request, intended)
        result.failure = RequestFailure(ErrorClass.CANCELLED, "stopped")
        return result

    load = _closed(_plan(), 5)
    asyncio.run(load.run(cancelled, fake.record))
    assert load.stopped and len(fake.records) <= 2  # each user's first turn at most


def test_an_open_loop_of_sessions_counts_later_turns_in_its_send_lags() -> None:
    spec = ShardSpec(
        run_id="r", shard_id="s", stage=0, region="local",
        provider={"name": "sim", "kind": "simulated"},
        workload=Workload.model_validate(
            {
                "mix": [
                    {
                        "prompt_tokens": {"dist": "fixed", "value": 4},
                        "output_tokens": {"dist": "fixed", "value": 2},
                    }
                ],
                "sessions": {"turns": 2},
            }
        ),
        seed=1, concurrency=0, requests=3, rate=ShardRate(rps=200.0, arrival="constant"),
    )  # fmt: skip
    load = build_session_load(spec, (), WordPrompts())
    assert isinstance(load.inner, OpenLoop)
    fake = Fake()
    asyncio.run(load.run(fake.send, fake.record))
    assert len(fake.records) == 6 and load.kind == "open"
    assert load.inner.send_lags_ns.count == 6  # 3 first turns (the loop's), 3 later ones
    figures = rate_figures(load, 200.0)
    assert figures["target_rps"] == 200.0 and "scheduled_rps" not in figures
    assert rate_figures(_closed(_plan(), 1), None) == {}
