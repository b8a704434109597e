"""Planning a run: stages (load levels, in order) of shards (provider × region)."""

from __future__ import annotations

from dataclasses import dataclass

from scenarios.model import Scenario
from scenarios.wire import ShardSpec


@dataclass(frozen=True)
class Stage:
    """One load level; its shards start together and all end before the next stage."""

    index: int
    concurrency: int
    shards: list[ShardSpec]


def plan_run(run_id: str, scenario: Scenario) -> list[Stage]:
    """Stages and shards of a run. Every provider and region of a stage receives the same
    requests (same sequence numbers, so the same prompts and lengths)."""
    stages = []
    for index, concurrency in enumerate(scenario.load.concurrency):
        shards = [
            ShardSpec(
                run_id=run_id,
                shard_id=f"s{index}.{provider.name}.{region}",
                stage=index,
                region=region,
                provider=provider,
                workload=scenario.workload,
                seed=scenario.seed,
                concurrency=concurrency,
                seq_start=0,
                requests=scenario.load.requests_per_level,
                duration_s=scenario.load.duration_s,
            )
            for provider in scenario.providers
            for region in scenario.regions
        ]
        stages.append(Stage(index, concurrency, shards))
    return stages
