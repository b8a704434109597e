"""Multi-turn sessions as a load shape (docs/workloads.md, "Multi-turn sessions").

A session is the unit the load schedules: the closed loop's virtual users each run
sessions back to back (``workers/load/closed_loop.py``), the open loop's arrivals each start
one (``workers/load/open_loop.py``; its ``max_in_flight`` then caps sessions in flight).
Either loop calls :meth:`SessionRunner.run` as its ``send``; the runner sends the
session's turns one after another, records each as it ends and waits between them:

- turn 1's intended start is the loop's (the user's slot freed, or the arrival);
- a generated turn t + 1 is intended at the end of turn t's answer plus a think time;
  a replayed one at the captured gap after turn t's intended start, never before turn
  t's answer ended. Schedule lag (sent − intended) is the client's own delay either way.

A session ends after its last planned turn (``done``), after a failed turn (``error``:
a conversation does not go on without its answer; a replayed one does, its next turn
being captured, not answered), before a turn that would exceed
``max_context_tokens`` (``context_cap``), or when the stage ends (``stage_end``: its
duration is over or the shard was stopped) before its next turn is due; the reason is
recorded on its last turn's record (``session_end``). A stage's duration bounds turns,
not only sessions: no turn starts after it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

from scenarios.datasets.files import FileEntry
from scenarios.limits import MAX_TOKENS
from scenarios.wire.contract import ShardSpec
from workers.client.errors import ErrorClass
from workers.client.result import RequestResult
from workers.load.closed_loop import ClosedLoop, RequestSource
from workers.load.conversation import Conversation
from workers.load.intended import IntendedStarts
from workers.load.open_loop import OpenLoop, sleep_until
from workers.load.quantiles import LogHistogram
from workers.load.schedule import NS_PER_S, arrival_offsets, part_arrivals, schedule_rng
from workers.load.session_plans import PlannedSession, replayed_sessions, session_planner
from workers.prompts.plan import PlannedRequest, PromptMaker

__all__ = ["SessionLoad", "SessionRunner", "build_session_load"]

Send = Callable[[PlannedRequest, int], Awaitable[RequestResult]]
Record = Callable[[PlannedRequest, RequestResult], None]


class SessionRunner:
    """Runs one session at a time per call of :meth:`run`: sends its turns, records
    each, and waits between them. ``intended`` holds every turn's intended start;
    ``later_lags`` (an open loop's send lags) gets every later turn's lateness."""

    def __init__(
        self,
        max_context_tokens: int,
        maker: PromptMaker,
        duration_s: float | None,
        later_lags: LogHistogram | None = None,
    ) -> None:
        self.max_context_tokens = max_context_tokens
        self.maker = maker
        self.duration_ns = None if duration_s is None else round(duration_s * NS_PER_S)
        self.later_lags = later_lags
        self.intended = IntendedStarts()
        self.sessions = 0
        self._send: Send | None = None
        self._record: Record | None = None
        self._load: SessionLoad | None = None

    def bind(self, send: Send, record: Record, load: SessionLoad) -> None:
        """Where turns are sent and recorded, and the load they belong to."""
        self._send, self._record, self._load = send, record, load

    async def run(self, session: PlannedSession, intended: int) -> RequestResult:
        """Run ``session`` from ``intended``; the first turn's result (the loop's)."""
        send, record, load = self._send, self._record, self._load
        assert send is not None, "bind() first"
        assert record is not None
        assert load is not None
        if not self.intended.begun:  # the inner loop set the stage's start before this
            self.intended.begin(load.start_ns, self.duration_ns)
        self.sessions += 1
        conversation = Conversation(session, self.max_context_tokens, self.maker)
        request = conversation.turn(0)
        assert request is not None, "the first turn is always sent"
        first: RequestResult | None = None
        index = 0
        while True:
            self.intended.append(intended)
            result = await send(request, intended)
            if first is None:
                first = result
            elif self.later_lags is not None:
                self.later_lags.add(result.sent - intended)
            end, following, due = self._next(
                session, conversation, index, request, result, intended
            )
            if end is not None:
                assert request.session is not None
                request = replace(request, session=replace(request.session, end=end))
            record(request, result)
            if result.failure is not None and result.failure.error_class is ErrorClass.CANCELLED:
                load.stop()  # the shard is being torn down: send nothing more
            if following is None:
                return first
            await sleep_until(due, lambda: load.stopped)
            if load.stopped:
                return first  # stopped while thinking: the last record has no session_end
            index, request, intended = index + 1, following, due

    def _next(
        self,
        session: PlannedSession,
        conversation: Conversation,
        index: int,
        request: PlannedRequest,
        result: RequestResult,
        intended: int,
    ) -> tuple[str | None, PlannedRequest | None, int]:
        """Why the session ends after this turn, or its next turn and when it is due."""
        # A replayed turn does not depend on the answer before it (it is sent as captured):
        # a failure does not end the session, or a failing server would shed the load.
        if result.failure is not None and not session.captured:
            return "error", None, 0
        if index + 1 >= session.turns:
            return "done", None, 0
        following = conversation.turn(index + 1) if conversation.answered(request, result) else None
        if following is None:
            return "context_cap", None, 0
        ended = result.end or result.sent
        gap = session.gaps_ns[index]
        due = max(ended, intended + gap) if session.captured else ended + gap
        load = self._load
        assert load is not None
        deadline = None if self.duration_ns is None else load.start_ns + self.duration_ns
        if load.stopped or (deadline is not None and due >= deadline):
            return "stage_end", None, 0
        return None, following, due


class SessionLoad:
    """A closed or open loop of sessions, as a load shape (``workers.load.shapes``)."""

    def __init__(
        self,
        inner: ClosedLoop[PlannedSession] | OpenLoop[PlannedSession],
        runner: SessionRunner,
        duration_s: float | None,
    ) -> None:
        self.inner = inner
        self.runner = runner
        self.duration_ns = None if duration_s is None else round(duration_s * NS_PER_S)

    @property
    def kind(self) -> str:
        """The loop's kind: ``closed`` or ``open``."""
        return self.inner.kind

    @property
    def start_ns(self) -> int:
        """When the stage began (perf ns)."""
        return self.inner.start_ns

    @property
    def intended(self) -> IntendedStarts:
        """Intended starts of every turn sent."""
        return self.runner.intended

    @property
    def stopped(self) -> bool:
        """True once stopped."""
        return self.inner.stopped

    def stop(self) -> None:
        """Start no further session or turn (in-flight turns complete)."""
        self.inner.stop()

    async def run(self, send: Send, record: Record) -> None:
        """Run the sessions; return when every session ended."""
        self.runner.bind(send, record, self)
        await self.inner.run(self.runner.run, _recorded_per_turn)

    def planned_end_ns(self) -> int:
        """The stage's end: start + duration, else the last turn's intended start."""
        if self.duration_ns is not None:
            return self.start_ns + self.duration_ns
        return self.intended.max if self.intended.max is not None else self.start_ns


def _recorded_per_turn(_: PlannedSession, __: RequestResult) -> None:
    """The loops' per-unit record: a session's turns were recorded as they ended."""


def build_session_load(
    spec: ShardSpec, entries: Sequence[FileEntry], maker: PromptMaker
) -> SessionLoad:
    """The shard's sessions: generated (``workload.sessions``) or a replayed session
    log, in a closed loop (virtual users) or an open loop (session arrivals)."""
    workload = spec.workload
    replayed = None
    if workload.sessions is not None:
        plan = session_planner(workload, spec.seed, spec.stage, maker)
        cap = workload.sessions.max_context_tokens
    else:
        assert workload.replay is not None, "sessions come from workload.sessions or a replay"
        replayed = replayed_sessions(
            entries,
            workload.replay.time_scale,
            maker,
            spec.seed,
            workload.shared_prefix_tokens,
            workload.replay.dataset,
        )
        plan, cap = replayed.plan, MAX_TOKENS  # a replay sends what it captured: no cap
    inner: ClosedLoop[PlannedSession] | OpenLoop[PlannedSession]
    rate = spec.rate
    if rate is None:
        source = RequestSource(plan, spec.seq_start, spec.requests, spec.duration_s)
        inner = ClosedLoop(spec.concurrency, source, spec.duration_s)
        runner = SessionRunner(cap, maker, spec.duration_s)
    else:
        if replayed is not None:
            offsets = iter(replayed.offsets_ns)
        else:
            rng = schedule_rng(spec.seed, spec.stage)
            offsets = arrival_offsets(rate.arrival, rate.rps, rate.burstiness, rng)
        duration_ns = None if spec.duration_s is None else round(spec.duration_s * NS_PER_S)
        arrivals = part_arrivals(offsets, rate.part, rate.parts, spec.requests, duration_ns)
        loop = OpenLoop(arrivals, plan, rate.max_in_flight, spec.duration_s)
        inner = loop
        runner = SessionRunner(cap, maker, spec.duration_s, loop.send_lags_ns)
    return SessionLoad(inner, runner, spec.duration_s)
