"""Queued runs: runs that wait for their targets (endpoint leases) or their team's quota.

A submission whose targets (``scenarios/targets.py``) are held by a running run, or
whose team already runs ``max_concurrent_runs``, is accepted as ``queued``: a ``runs``
row in that state (so ``GET /v1/runs/{id}`` answers) and a ``run_queue`` row with the
validated scenario and what its start needs, so a restarted control plane still has it
queued. The control loop calls :meth:`RunQueue.start_due` on every iteration; it starts
the queued runs whose targets are free and whose team is under its quota.

The order is one pass over the queue, oldest first (:meth:`RunQueue.plan`):

- a run starts when none of its targets is held (by a running run, a run being
  started, or an older queued run waiting for it) and its team is under its quota;
- a run that waits for a target claims its targets, so no younger run jumps ahead of it
  there (FIFO per target);
- a run that waits only for its team's quota claims nothing: one team's queue never
  holds back another team's run, on another target or on the same one.

A provider with ``shared: true`` measures its target shared: it waits only for a run
holding that target alone, and runs beside other shared runs (a readers-writer rule:
a run that asked for the target alone is never overlapped, by anyone).

A queued run cancelled is removed from the queue and ends ``cancelled``. A queued run
whose start fails (its scenario no longer plans) ends ``failed`` instead of blocking
its targets.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import duckdb
from redis.exceptions import RedisError

from api.access.caller import Caller
from api.access.ownership import Kind, owner_of
from api.access.teams import TeamPolicy, TeamStore
from api.control.dispatch import live_workers
from api.control.run_coordinator import RunCoordinator
from scenarios.errors import QuotaExceeded
from scenarios.model import Scenario
from scenarios.settings import TeamSettings
from scenarios.targets import target_modes
from scenarios.wire.contract import RunState

if TYPE_CHECKING:
    from api.control.plane import ControlPlane

log = logging.getLogger("tokenbench.queue")

# The queue is planned again at least this often even when no run started or ended
# (an admin may have raised a team's quota meanwhile).
REPLAN_EVERY_S = 1.0


@dataclass(eq=False)  # one object per queued run: compared by identity
class QueuedRun:
    """A run waiting in the queue, as persisted in ``run_queue``."""

    run_id: str
    team: str
    token_id: str | None
    queued_at: dt.datetime
    scenario: Scenario
    needs: dict[str, bool]  # target → held alone (True) or measured shared (False)
    wait_for_workers: bool

    @property
    def targets(self) -> list[str]:
        """The targets it leases (held alone), sorted."""
        return sorted(t for t, alone in self.needs.items() if alone)


# A run measuring a target, and whether it holds it alone (False: shared).
Holder = tuple[str, bool]


def _blockers(needs: dict[str, bool], users: dict[str, list[Holder]]) -> set[str]:
    """The runs of ``users`` a run needing ``needs`` must wait for: on a target it holds
    alone, every one; on a target it measures shared, those holding it alone."""
    return {
        run
        for target, alone in needs.items()
        for run, their_alone in users.get(target, [])
        if alone or their_alone
    }


@dataclass(frozen=True)
class Waiting:
    """Why a queued run waits: its place (1 = next) among the runs ahead of it for the
    same targets (or, waiting for its team's quota, its team's), and the runs it waits for."""

    position: int
    waiting_for: list[str]
    reason: str


@dataclass
class Plan:
    """One pass over the queue: the runs to start now, and why the others wait."""

    start: list[QueuedRun] = field(default_factory=list)
    waiting: dict[str, Waiting] = field(default_factory=dict)


@dataclass(frozen=True)
class Admission:
    """What a new submission gets: started now, or queued with why."""

    queued: bool
    waiting: Waiting | None = None


class RunQueue:
    """The queued runs of one control plane, in memory and in ``run_queue``."""

    def __init__(
        self, plane: ControlPlane, con: duckdb.DuckDBPyConnection, teams: TeamSettings
    ) -> None:
        self.plane = plane
        self.con = con
        self.teams = teams
        self.entries: list[QueuedRun] = []
        # Runs being created (admitted, not yet in plane.runs): they hold their targets.
        self.starting: dict[str, tuple[str, dict[str, bool]]] = {}
        self._team_of: dict[str, str] = {}
        self._needs_of: dict[str, dict[str, bool]] = {}
        self._last_plan: tuple[frozenset[str], int, float] | None = None

    # ------------------------------------------------------------------ restart

    def load(self) -> list[str]:
        """The runs queued before a restart, oldest first; a row whose run already left
        the queue (started, cancelled) is dropped."""
        self.con.execute(
            "DELETE FROM run_queue WHERE run_id NOT IN "
            "(SELECT run_id FROM runs WHERE state = 'queued')"
        )
        rows = self.con.execute(
            "SELECT run_id, team, token_id, queued_at, scenario, request "
            "FROM run_queue ORDER BY queued_at, run_id"
        ).fetchall()
        self.entries = []
        for run_id, team, token_id, queued_at, scenario, request in rows:
            try:
                parsed = Scenario.model_validate_json(scenario)
            except ValueError as exc:  # one unreadable row must not stop the others
                log.error("queued run %s cannot be read back: %s", run_id, exc)
                self._end(str(run_id), RunState.FAILED)
                continue
            self.entries.append(
                QueuedRun(
                    str(run_id),
                    str(team),
                    token_id,
                    queued_at,
                    parsed,
                    target_modes(parsed),
                    bool(json.loads(request).get("wait_for_workers", False)),
                )
            )
        return [e.run_id for e in self.entries]

    # ------------------------------------------------------------------ admission

    def admit(self, run_id: str, scenario: Scenario, caller: Caller) -> Admission:
        """Start now (its targets are reserved for it until :meth:`started`), or queue
        behind the runs named; QuotaExceeded (429) when its team's queue is full."""
        candidate = QueuedRun(
            run_id,
            caller.team,
            caller.token_id,
            dt.datetime.now(dt.UTC),
            scenario,
            target_modes(scenario),
            False,
        )
        plan = self.plan(extra=candidate)
        if any(entry is candidate for entry in plan.start):
            self.starting[run_id] = (caller.team, candidate.needs)
            return Admission(queued=False)
        policy = self._policy(caller.team)
        queued = sum(1 for e in self.entries if e.team == caller.team)
        if queued >= policy.max_queued_runs:
            raise QuotaExceeded(
                f"team {caller.team} has {queued} queued runs, its max_queued_runs "
                f"({policy.setting('max_queued_runs')}) is {policy.max_queued_runs}: "
                "wait for some to start or cancel one",
                quota="max_queued_runs",
                setting=policy.setting("max_queued_runs"),
            )
        return Admission(queued=True, waiting=plan.waiting[run_id])

    def enqueue(self, run_id: str, scenario: Scenario, caller: Caller, wait: bool) -> QueuedRun:
        """Persist an admitted run as queued (its ``runs`` and ``run_queue`` rows)."""
        entry = QueuedRun(
            run_id,
            caller.team,
            caller.token_id,
            dt.datetime.now(dt.UTC),
            scenario,
            target_modes(scenario),
            wait,
        )
        document = scenario.model_dump_json()
        self.con.execute("BEGIN TRANSACTION")
        try:
            self.con.execute(
                "INSERT INTO runs VALUES (?, ?, ?, ?, NULL, 'queued')",
                [run_id, scenario.name, document, entry.queued_at],
            )
            self.con.execute(
                "INSERT INTO run_queue VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    run_id,
                    entry.team,
                    entry.token_id,
                    entry.queued_at,
                    document,
                    entry.targets,
                    json.dumps({"wait_for_workers": wait}),
                ],
            )
            self.con.execute("COMMIT")
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        self.entries.append(entry)
        self._last_plan = None
        return entry

    def started(self, run_id: str, team: str) -> None:
        """The run's creation ended (in ``plane.runs`` now, or failed): its reservation
        goes, and its team is remembered for the quota."""
        self.starting.pop(run_id, None)
        self._team_of[run_id] = team
        self._last_plan = None

    # ------------------------------------------------------------------ views

    def holds(self, run_id: str) -> bool:
        """Whether ``run_id`` is queued (or being started from the queue)."""
        return run_id in self.starting or any(e.run_id == run_id for e in self.entries)

    def active(self, run_id: str) -> bool:
        """Whether the run is going or queued (a schedule's next fire is skipped then)."""
        return run_id in self.plane.runs or self.holds(run_id)

    def note(self, run_id: str) -> str | None:
        """One line on why a queued run waits (None if it started)."""
        waiting = self.waiting(run_id)
        if waiting is None:
            return None
        return f"queued: {waiting.reason} ({', '.join(waiting.waiting_for)})"

    def entry(self, run_id: str) -> QueuedRun | None:
        """The queued run, if ``run_id`` is one."""
        return next((e for e in self.entries if e.run_id == run_id), None)

    def waiting(self, run_id: str) -> Waiting | None:
        """Why the queued run waits (None if it is not queued)."""
        if self.entry(run_id) is None:
            return None
        return self.plan().waiting.get(run_id)

    def cancel(self, run_id: str) -> bool:
        """Remove a queued run: it ends ``cancelled``. False if it is not queued."""
        entry = self.entry(run_id)
        if entry is None:
            return False
        self.entries.remove(entry)
        self._end(run_id, RunState.CANCELLED)
        self._last_plan = None
        return True

    # ------------------------------------------------------------------ the loop

    async def start_due(self) -> list[str]:
        """Start the queued runs whose targets are free and whose team is under its
        quota (the control loop's hook); cheap when nothing changed."""
        if not self.entries:
            return []
        signature = (frozenset(self.plane.runs), len(self.entries))
        now = time.monotonic()
        if (
            self._last_plan is not None
            and self._last_plan[:2] == signature
            and now - self._last_plan[2] < REPLAN_EVERY_S
        ):
            return []
        self._last_plan = (*signature, now)
        due = self.plan().start
        for entry in due:  # reserved before the first await: nothing else takes them
            self.entries.remove(entry)
            self.starting[entry.run_id] = (entry.team, entry.needs)
        started = []
        for index, entry in enumerate(due):
            try:
                workers = await live_workers(self.plane.redis, entry.scenario.regions)
            except (RedisError, OSError) as exc:
                # Redis briefly unreachable: these runs stay queued, in their order.
                log.warning("queued runs wait: Redis did not answer (%s)", exc)
                for back in due[index:]:
                    self.starting.pop(back.run_id, None)
                self.entries = sorted(
                    [*self.entries, *due[index:]], key=lambda e: (e.queued_at, e.run_id)
                )
                self._last_plan = None
                break
            try:
                await self.plane.submit(
                    entry.scenario,
                    run_id=entry.run_id,
                    wait_for_workers=entry.wait_for_workers,
                    workers=workers,
                )
                started.append(entry.run_id)
                log.info("queued run %s started", entry.run_id)
            except Exception:
                log.exception("queued run %s could not start: it ends failed", entry.run_id)
                self._end(entry.run_id, RunState.FAILED)
            finally:
                self.con.execute("DELETE FROM run_queue WHERE run_id = ?", [entry.run_id])
                self.started(entry.run_id, entry.team)
        return started

    def plan(self, extra: QueuedRun | None = None) -> Plan:
        """One pass over the queue (and ``extra``, a submission, last), oldest first:
        which runs start now and why the others wait (the module's docstring)."""
        holders = self._holders()
        running = self._running_per_team()
        claims: dict[str, list[Holder]] = {}  # target → the queued runs waiting for it
        policies: dict[str, TeamPolicy] = {}
        plan = Plan()
        team_queue: Counter[str] = Counter()
        entries = [*self.entries, extra] if extra is not None else self.entries
        for entry in entries:
            if entry.team not in policies:
                policies[entry.team] = self._policy(entry.team)
            policy = policies[entry.team]
            held = _blockers(entry.needs, holders)
            ahead = _blockers(entry.needs, claims)
            team_full = running[entry.team] >= policy.max_concurrent_runs
            if not held and not ahead and not team_full:
                plan.start.append(entry)
                running[entry.team] += 1
                for target, alone in entry.needs.items():
                    holders.setdefault(target, []).append((entry.run_id, alone))
                continue
            if held or ahead:
                # It waits for its targets: no younger run takes them before it.
                for target, alone in entry.needs.items():
                    claims.setdefault(target, []).append((entry.run_id, alone))
                reason = "its target is in use by another run"
                waiting_for = sorted(held | ahead)
                position = len(ahead) + 1
            else:
                reason = (
                    f"team {entry.team} runs {running[entry.team]} runs, its "
                    f"max_concurrent_runs ({policy.setting('max_concurrent_runs')}) is "
                    f"{policy.max_concurrent_runs}"
                )
                waiting_for = self._team_runs(entry.team)
                position = team_queue[entry.team] + 1
            team_queue[entry.team] += 1
            plan.waiting[entry.run_id] = Waiting(position, waiting_for, reason)
        return plan

    # ------------------------------------------------------------------ helpers

    def _policy(self, team: str) -> TeamPolicy:
        return TeamStore(self.con, self.teams).policy(team)

    def team_of(self, run_id: str) -> str:
        """The team of a run the loop drives (its owner; remembered once read)."""
        team = self._team_of.get(run_id)
        if team is None:
            team = owner_of(self.con, Kind.RUN, run_id).team
            self._team_of[run_id] = team
        return team

    def _runs(self) -> list[RunCoordinator]:
        return [c for c in self.plane.runs.values() if isinstance(c, RunCoordinator)]

    def _holders(self) -> dict[str, list[Holder]]:
        """Target → the running (or starting) runs measuring it, and whether alone."""
        holders: dict[str, list[Holder]] = {}
        live = self._runs()
        for stale in set(self._needs_of) - {c.run_id for c in live}:
            del self._needs_of[stale]
        for coordinator in live:
            needs = self._needs_of.get(coordinator.run_id)
            if needs is None:
                needs = self._needs_of[coordinator.run_id] = target_modes(coordinator.scenario)
            for target, alone in needs.items():
                holders.setdefault(target, []).append((coordinator.run_id, alone))
        for run_id, (_, needs) in self.starting.items():
            for target, alone in needs.items():
                holders.setdefault(target, []).append((run_id, alone))
        return holders

    def _running_per_team(self) -> Counter[str]:
        live = self._runs()
        # Teams of ended runs are forgotten: the map stays as large as the runs going.
        keep = {c.run_id for c in live} | set(self.starting)
        for ended in set(self._team_of) - keep:
            del self._team_of[ended]
        counts: Counter[str] = Counter(self.team_of(c.run_id) for c in live)
        counts.update(team for team, _ in self.starting.values())
        return counts

    def _team_runs(self, team: str) -> list[str]:
        runs = [c.run_id for c in self._runs() if self.team_of(c.run_id) == team]
        return sorted(runs + [r for r, (t, _) in self.starting.items() if t == team])

    def _end(self, run_id: str, state: RunState) -> None:
        self.con.execute("DELETE FROM run_queue WHERE run_id = ?", [run_id])
        self.con.execute(
            "UPDATE runs SET state = ?, finished_at = ? WHERE run_id = ? AND state = 'queued'",
            [state.value, dt.datetime.now(dt.UTC), run_id],
        )
