"""A shadow-traffic session as a run of the control plane (docs/shadow.md).

A session has no stages to dispatch (the gateway enqueues shadow tasks itself), a fixed
set of record streams (its shards: the primary's, and each shadow's per region), and no
end until it is stopped.
"""

from __future__ import annotations

from analytics.shadow.capture import SessionShard, activate_session, close_session, register_session
from analytics.store.runs import PlannedShard, RunStore
from api.control.coordinator import Coordinator, ShardProgress
from scenarios.gateway_config import GatewayConfig
from scenarios.model import Scenario
from scenarios.wire.contract import PRIMARY_SHARD, RunState, shadow_shard_id


def session_shards(config: GatewayConfig) -> list[SessionShard]:
    """The record streams of a session: the primary's, and each shadow's per region."""
    shards = [SessionShard(PRIMARY_SHARD, config.primary.name, config.gateway_region)]
    shards += [
        SessionShard(shadow_shard_id(shadow.name, region), shadow.name, region)
        for shadow in config.shadows
        for region in config.regions
    ]
    return shards


class SessionCoordinator(Coordinator):
    """A shadow session: a continuous run whose records are ingested until it is stopped.

    Nothing is dispatched (the gateway enqueues shadow tasks itself) and there are no
    lifecycle events; stopping it goes through the cancel path of the control plane (the
    workers see the cancel key and skip the session's remaining tasks), which drains the
    streams for the grace period and then finishes the session.
    """

    def __init__(self, run_id: str, scenario: Scenario, store: RunStore) -> None:
        # No stages: nothing is planned or dispatched. Never fail a region for lack of
        # workers: the gateway's traffic, not a plan, decides when shadows are needed.
        super().__init__(run_id, scenario, store, stages=[], wait_for_workers=True)

    @classmethod
    def open(cls, run_id: str, config: GatewayConfig, store: RunStore) -> SessionCoordinator:
        """A new session, recorded with its shards (accepted from the start)."""
        scenario = config.session_scenario()
        shards = session_shards(config)
        register_session(store.con, run_id, config.name, config.model_dump_json())
        store.create_run(
            run_id,
            scenario,
            [PlannedShard(s.shard_id, 0, s.provider, s.region, 0, None) for s in shards],
        )
        activate_session(store.con, run_id, shards)
        return cls(run_id, scenario, store)

    @classmethod
    def resume_session(cls, run_id: str, store: RunStore) -> SessionCoordinator:
        """A session left running (after a control-plane restart)."""
        scenario = Scenario.model_validate_json(store.scenario_json(run_id))
        coordinator = cls(run_id, scenario, store)
        coordinator.records_ingested = store.records_count(run_id)
        return coordinator

    @property
    def complete(self) -> bool:
        """Only a stop ends a session."""
        return self.state != RunState.RUNNING

    @property
    def quiet(self) -> bool:
        """Records may arrive at any time: a stop always drains for its full grace period."""
        return False

    def to_dispatch(self) -> list[ShardProgress]:
        """Nothing: the gateway enqueues shadow tasks itself."""
        return []

    def stalled(self, now: float, timeout_s: float) -> list[ShardProgress]:
        """Never: a session is quiet whenever its gateway has no traffic."""
        return []

    def cancel_unsettled(self, reason: str) -> None:
        """The stop's grace period is over: the session ends finished."""
        self.finish(RunState.FINISHED)

    def finish(self, state: RunState | None = None) -> RunState:
        """Settle the session's shards with their record counts and end the run."""
        close_session(self.store.con, self.run_id)
        self.state = state or RunState.FINISHED
        self.store.finish_run(self.run_id, self.state)
        return self.state
