"""Planning a run: stages (load levels, in order) of shards (provider × region × part).

Closed loop: a stage's concurrency for one provider and region is split into parts of
at most ``max_streams_per_shard`` streams, each a shard of its own, so one load level
can exceed what one worker process drives; the parts divide the stage's requests into
disjoint ranges of sequence numbers, so together they send exactly the planned requests.

Open loop (rates, replay): every provider and region gets the stage's full rate; a rate
above ``max_rps_per_shard`` (or a ``max_in_flight`` cap above ``max_streams_per_shard``)
is split into parts that share one seeded schedule, part p sending arrivals p, p + P,
p + 2P, ... of it. Their union is the planned schedule whatever P is, as long as the
parts start together (a stage's shards are dispatched at once).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from scenarios.model import Scenario, Workload
from scenarios.wire import ShardRate, ShardSpec
from workers.load.files import load_replay

DEFAULT_MAX_STREAMS_PER_SHARD = 512
# What one worker process sends comfortably with room for its token events
# (benchmarks/client_capacity.py; docs/load.md).
DEFAULT_MAX_RPS_PER_SHARD = 200.0


@dataclass(frozen=True)
class Stage:
    """One load level; its shards start together and all end before the next stage.

    ``concurrency`` is the closed loop's virtual users, or the open loop's
    ``max_in_flight`` cap (0: none); ``rate`` the open loop's arrivals per second per
    provider and region (None for closed loops).
    """

    index: int
    concurrency: int
    shards: list[ShardSpec]
    rate: float | None = None


def split(total: int, parts: int) -> list[int]:
    """``total`` divided into ``parts`` integers differing by at most one."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def plan_run(
    run_id: str,
    scenario: Scenario,
    max_streams_per_shard: int = DEFAULT_MAX_STREAMS_PER_SHARD,
    max_rps_per_shard: float = DEFAULT_MAX_RPS_PER_SHARD,
) -> list[Stage]:
    """Stages and shards of a run. Every provider and region of a stage receives the same
    requests (same sequence numbers, so the same prompts and lengths)."""
    scenario = _with_absolute_paths(scenario)
    if scenario.workload.replay is not None:
        return [_replay_stage(run_id, scenario, max_streams_per_shard, max_rps_per_shard)]
    rate = scenario.load.rate
    if rate is not None:
        return [
            _open_stage(
                run_id,
                scenario,
                index,
                ShardRate(rps=rps, arrival=rate.arrival, burstiness=rate.burstiness),
                rate.max_in_flight,
                scenario.load.requests_per_level,
                max_streams_per_shard,
                max_rps_per_shard,
            )
            for index, rps in enumerate(rate.rps)
        ]
    return [
        _closed_stage(run_id, scenario, index, concurrency, max_streams_per_shard)
        for index, concurrency in enumerate(scenario.load.concurrency)
    ]


def _closed_stage(
    run_id: str, scenario: Scenario, index: int, concurrency: int, max_streams_per_shard: int
) -> Stage:
    requests = scenario.load.requests_per_level
    parts = math.ceil(concurrency / max_streams_per_shard)
    if requests is not None:
        parts = min(parts, requests)  # never a shard with nothing to send
    streams = split(concurrency, parts)
    counts = split(requests, parts) if requests is not None else [None] * parts
    starts = [sum(c or 0 for c in counts[:i]) for i in range(parts)]
    shards = [
        _shard(run_id, scenario, index, provider_index, region, part, parts).model_copy(
            update={
                "concurrency": streams[part],
                "seq_start": starts[part],
                "requests": counts[part],
            }
        )
        for provider_index in range(len(scenario.providers))
        for region in scenario.regions
        for part in range(parts)
    ]
    return Stage(index, concurrency, shards)


def _open_stage(
    run_id: str,
    scenario: Scenario,
    index: int,
    rate: ShardRate,
    max_in_flight: int | None,
    requests: int | None,
    max_streams_per_shard: int,
    max_rps_per_shard: float,
) -> Stage:
    parts = math.ceil(rate.rps / max_rps_per_shard)
    if max_in_flight is not None:
        parts = max(parts, math.ceil(max_in_flight / max_streams_per_shard))
        parts = min(parts, max_in_flight)  # every part needs a slot of the cap
    if requests is not None:
        parts = min(parts, requests)  # never a shard with nothing to send
    caps = split(max_in_flight, parts) if max_in_flight is not None else [0] * parts
    # Arrivals are dealt round-robin, so part p sends seqs p, p + P, ...: with N requests
    # that is split(N, P)[p] of them.
    counts = split(requests, parts) if requests is not None else [None] * parts
    shards = [
        _shard(run_id, scenario, index, provider_index, region, part, parts).model_copy(
            update={
                "concurrency": caps[part],
                "seq_start": part,
                "requests": counts[part],
                "rate": rate.model_copy(
                    update={"part": part, "parts": parts, "max_in_flight": caps[part] or None}
                ),
            }
        )
        for provider_index in range(len(scenario.providers))
        for region in scenario.regions
        for part in range(parts)
    ]
    return Stage(index, max_in_flight or 0, shards, rate.rps)


def _replay_stage(
    run_id: str, scenario: Scenario, max_streams_per_shard: int, max_rps_per_shard: float
) -> Stage:
    replay = scenario.workload.replay
    assert replay is not None
    entries = load_replay(replay.path)  # WorkloadFileError names the file and line
    count = len(entries)
    if scenario.load.requests_per_level is not None:
        count = min(count, scenario.load.requests_per_level)
    first, last = entries[0].timestamp_s or 0.0, entries[count - 1].timestamp_s or 0.0
    span_s = (last - first) * replay.time_scale
    rps = (count - 1) / span_s if count > 1 and span_s > 0 else max_rps_per_shard
    return _open_stage(
        run_id,
        scenario,
        0,
        ShardRate(rps=rps, replay=True),
        None,
        count,
        max_streams_per_shard,
        max_rps_per_shard,
    )


def _shard(
    run_id: str,
    scenario: Scenario,
    index: int,
    provider_index: int,
    region: str,
    part: int,
    parts: int,
) -> ShardSpec:
    provider = scenario.providers[provider_index]
    return ShardSpec(
        run_id=run_id,
        shard_id=f"s{index}.{provider.name}.{region}" + (f".{part}" if parts > 1 else ""),
        stage=index,
        region=region,
        provider=provider,
        workload=scenario.workload,
        seed=scenario.seed,
        concurrency=1,
        duration_s=scenario.load.duration_s,
        warmup_s=scenario.load.warmup_s,
        cooldown_s=scenario.load.cooldown_s,
    )


def _with_absolute_paths(scenario: Scenario) -> Scenario:
    """Workload files resolved against this process's directory, so that workers (on
    this machine, or with the file at the same path) find them whatever their cwd."""
    workload: Workload = scenario.workload
    update: dict[str, object] = {}
    if workload.replay is not None:
        update["replay"] = workload.replay.model_copy(
            update={"path": str(Path(workload.replay.path).resolve())}
        )
    if workload.prompts is not None:
        update["prompts"] = workload.prompts.model_copy(
            update={"path": str(Path(workload.prompts.path).resolve())}
        )
    if not update:
        return scenario
    return scenario.model_copy(update={"workload": workload.model_copy(update=update)})
