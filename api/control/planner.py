"""Planning a run: stages (load levels, in order) of shards (provider × region × part).

Closed loop: a stage's concurrency for one provider and region is split into parts of
at most ``max_streams_per_shard`` streams, each a shard of its own, so one load level
can exceed what one worker process drives; the parts divide the stage's requests into
disjoint ranges of sequence numbers, so together they send exactly the planned requests.

With ``workload.sessions`` the unit is a session instead of a request: parts get
disjoint ranges of sessions (closed) or every P-th session arrival (open), so all turns
of a session run in one shard.

Open loop (rates, replay): every provider and region gets the stage's full rate; a rate
above ``max_rps_per_shard`` (or a ``max_in_flight`` cap above ``max_streams_per_shard``)
is split into parts that share one seeded schedule, part p sending arrivals p, p + P,
p + 2P, ... of it. Their union is the planned schedule whatever P is, as long as the
parts start together (a stage's shards are dispatched at once).

Scale-out (docs/scaling.md): one worker process drives its shards on one event loop, so
one core. A region with several live worker processes (``tokenbench worker --processes
N``, counted by their heartbeats when the run is created) gets each stage split into as
many parts, as long as each part keeps at least ``MIN_STREAMS_PER_PART`` streams or
``MIN_RPS_PER_PART`` arrivals per second: below that one process has cores to spare and
a split only adds shards to coordinate. Each idle process takes one part from the
region's queue (Redis serves blocked consumers in turn). The report shows the stage's
level, never a part's share (``stage_concurrency``; an open loop's parts all carry the
stage's rate).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from analytics.store.runs import PlannedShard
from api.control.parts import (
    DEFAULT_MAX_RPS_PER_SHARD,
    DEFAULT_MAX_STREAMS_PER_SHARD,
    check_level_size,
    check_plan_size,
    closed_parts,
    closed_streams,
    open_cap,
    open_parts,
    split,
)
from scenarios.limits import MAX_SHARDS_PER_RUN
from scenarios.loader import Problem, ScenarioError
from scenarios.model import Scenario
from scenarios.providers.kinds import Provider
from scenarios.wire.contract import ShardRate, ShardSpec

# Parts a level is split into, by region (the same for each provider of the level).
Parts = Mapping[str, int]


@dataclass(frozen=True)
class Stage:
    """One load level; its shards start together and all end before the next stage.

    ``concurrency`` is the closed loop's virtual users, or the open loop's
    ``max_in_flight`` cap (0: none); ``rate`` the open loop's arrivals per second per
    provider and region (None for closed loops). A stage decided while the run goes
    (docs/answers.md) gives each provider its own level: ``levels`` and ``rates`` by
    provider name, and ``concurrency``/``rate`` are its first provider's.
    """

    index: int
    concurrency: int
    shards: list[ShardSpec]
    rate: float | None = None
    levels: dict[str, int] = field(default_factory=dict)
    rates: dict[str, float | None] = field(default_factory=dict)

    def level_of(self, provider: str) -> int:
        """The stage's level for ``provider`` (stored as each shard's stage_concurrency)."""
        return self.levels.get(provider, self.concurrency)

    def rate_of(self, provider: str) -> float | None:
        """The stage's open-loop rate for ``provider`` (None: closed loop)."""
        return self.rates.get(provider, self.rate)


def stored_stages(shards: Sequence[tuple[int, ShardSpec]]) -> list[Stage]:
    """The stages of a stored plan: (stage level, spec) of every shard, in plan order.

    A stage's rate is its open loop's rate per provider and region (every part carries
    it), None for a closed loop."""
    stages: dict[int, Stage] = {}
    for level, spec in shards:
        stage = stages.get(spec.stage)
        rate = spec.rate.rps if spec.rate is not None else None
        if stage is None:
            stage = stages[spec.stage] = Stage(spec.stage, level, [], rate)
        stage.shards.append(spec)
        stage.levels[spec.provider.name] = level
        stage.rates[spec.provider.name] = rate
    return [stages[index] for index in sorted(stages)]


def planned_shards(stages: Sequence[Stage]) -> list[PlannedShard]:
    """The rows the run store keeps of ``stages``' shards: each with its spec and its
    stage's level for its provider (what a report shows, never a part's share)."""
    return [
        PlannedShard(
            s.shard_id,
            s.stage,
            s.provider.name,
            s.region,
            s.concurrency,
            s.requests,
            stage_concurrency=stage.level_of(s.provider.name),
            spec=s,
        )
        for stage in stages
        for s in stage.shards
    ]


def plan_run(
    run_id: str,
    scenario: Scenario,
    max_streams_per_shard: int = DEFAULT_MAX_STREAMS_PER_SHARD,
    max_rps_per_shard: float = DEFAULT_MAX_RPS_PER_SHARD,
    replay_times: Sequence[float] = (),
    workers: Mapping[str, int] | None = None,
) -> list[Stage]:
    """Stages and shards of a run. Every provider and region of a stage receives the same
    requests (same sequence numbers, so the same prompts and lengths). A replay is
    planned from its dataset's timestamps (``replay_times``, in order, from the dataset
    store): no file is read here. ``workers`` is the number of live worker processes per
    region (missing: one); a stage is split over them."""
    live = {region: (workers or {}).get(region, 1) for region in scenario.regions}
    if scenario.load.adaptive:
        return _initial_adaptive_stages(run_id, scenario, max_streams_per_shard, live)
    if scenario.workload.replay is not None:
        return [
            _replay_stage(
                run_id, scenario, max_streams_per_shard, max_rps_per_shard, replay_times, live
            )
        ]
    rate = scenario.load.rate
    # Sessions are the unit of a session workload: a shard gets whole sessions, never
    # part of one (its turns go to one provider, in one region, in order).
    requests = scenario.units_per_level()
    # Each level's parts per region, computed once: the plan's size is checked with them
    # before any shard is built (a scenario within every field's bound can still
    # multiply into too many shards: levels × parts × ...), then its shards built.
    levels: list[Parts] = []
    if rate is not None:
        for index, rps in enumerate(rate.rps):
            parts = {
                region: open_parts(
                    rps, rate.max_in_flight, requests, max_streams_per_shard, max_rps_per_shard, n
                )
                for region, n in live.items()
            }
            path = f"load.rate.rps.{index}"
            check_level_size(scenario, path, sum(parts.values()), max_streams_per_shard)
            levels.append(parts)
    else:
        for index, concurrency in enumerate(scenario.load.concurrency):
            parts = {
                region: closed_parts(concurrency, requests, max_streams_per_shard, n)
                for region, n in live.items()
            }
            path = f"load.concurrency.{index}"
            check_level_size(scenario, path, sum(parts.values()), max_streams_per_shard)
            levels.append(parts)
    check_plan_size(scenario, sum(sum(parts.values()) for parts in levels))
    if rate is not None:
        return [
            _open_stage(
                run_id,
                scenario,
                index,
                ShardRate(rps=rps, arrival=rate.arrival, burstiness=rate.burstiness),
                rate.max_in_flight,
                requests,
                levels[index],
            )
            for index, rps in enumerate(rate.rps)
        ]
    return [
        _closed_stage(run_id, scenario, index, concurrency, requests, levels[index])
        for index, concurrency in enumerate(scenario.load.concurrency)
    ]


def initial_levels(scenario: Scenario) -> list[int]:
    """Closed-loop levels an adaptive load starts with, known before any result: one
    stream (the synchronous stage), then the throughput stage's streams (a sweep, or a
    search by rate; a search by concurrency starts from one stream alone)."""
    load = scenario.load
    if load.sweep is not None:
        return [1, load.sweep.throughput_concurrency]
    if load.find_capacity is not None and load.find_capacity.by == "rate":
        return [1, load.find_capacity.throughput_concurrency]
    return [1]


def _initial_adaptive_stages(
    run_id: str, scenario: Scenario, max_streams_per_shard: int, workers: Mapping[str, int]
) -> list[Stage]:
    levels = initial_levels(scenario)
    requests = scenario.load.requests_per_level
    parts = [
        {
            region: closed_parts(level, requests, max_streams_per_shard, n)
            for region, n in workers.items()
        }
        for level in levels
    ]
    check_plan_size(scenario, sum(sum(level.values()) for level in parts))
    return [
        _closed_stage(run_id, scenario, index, level, requests, parts[index])
        for index, level in enumerate(levels)
    ]


def plan_decided_stage(
    run_id: str,
    scenario: Scenario,
    index: int,
    levels: Mapping[str, float],
    kind: Literal["open", "closed"],
    shards_so_far: int,
    max_streams_per_shard: int = DEFAULT_MAX_STREAMS_PER_SHARD,
    max_rps_per_shard: float = DEFAULT_MAX_RPS_PER_SHARD,
    workers: Mapping[str, int] | None = None,
    durations: Mapping[str, float | None] | None = None,
) -> Stage:
    """A stage decided while the run goes (docs/answers.md): each provider named in
    ``levels`` at its own level (req/s when ``kind`` is open, streams when closed), in
    every region, split over the regions' worker processes as a planned stage is, and
    bounded by ``durations[provider]`` instead of ``load.duration_s`` where given.
    ScenarioError when the run would exceed MAX_SHARDS_PER_RUN with it."""
    live = {region: (workers or {}).get(region, 1) for region in scenario.regions}
    requests = scenario.load.requests_per_level
    names = [p.name for p in scenario.providers]
    chosen = [(names.index(name), level) for name, level in levels.items()]
    # Each provider's parts per region, computed once: counted, then built.
    parts: list[Parts] = [
        {
            region: open_parts(level, None, requests, max_streams_per_shard, max_rps_per_shard, n)
            if kind == "open"
            else closed_parts(round(level), requests, max_streams_per_shard, n)
            for region, n in live.items()
        }
        for _, level in chosen
    ]
    total = sum(sum(provider.values()) for provider in parts)
    if shards_so_far + total > MAX_SHARDS_PER_RUN:
        message = (
            f"the next decided stage would bring the run to {shards_so_far + total} shards, "
            f"more than the {MAX_SHARDS_PER_RUN} a run may have"
        )
        raise ScenarioError([Problem("load", message)])
    arrival = _decided_arrival(scenario)
    stage = Stage(index, 0, [])
    for (provider_index, level), provider_parts in zip(chosen, parts, strict=True):
        if kind == "open":
            rate = ShardRate(rps=level, arrival=arrival)
            part = _open_stage(
                run_id, scenario, index, rate, None, requests, provider_parts, [provider_index]
            )
        else:
            part = _closed_stage(
                run_id, scenario, index, round(level), requests, provider_parts, [provider_index]
            )
        name = names[provider_index]
        if not stage.shards:
            stage = Stage(index, part.concurrency, [], part.rate)
        if durations is not None and name in durations:
            update = {"duration_s": durations[name]}
            part.shards[:] = [spec.model_copy(update=update) for spec in part.shards]
        stage.shards.extend(part.shards)
        stage.levels[name] = part.concurrency
        stage.rates[name] = part.rate
    return stage


def _decided_arrival(scenario: Scenario) -> Literal["poisson", "constant"]:
    load = scenario.load
    if load.sweep is not None:
        return load.sweep.arrival
    if load.find_capacity is not None:
        return load.find_capacity.arrival
    return "poisson"


def _closed_stage(
    run_id: str,
    scenario: Scenario,
    index: int,
    concurrency: int,
    requests: int | None,
    parts_by_region: Parts,
    providers: Sequence[int] | None = None,
) -> Stage:
    """A closed-loop stage, each region's level split into ``parts_by_region[region]``
    parts (the same for every provider in ``providers``, default all)."""
    shards: list[ShardSpec] = []
    for provider_index in providers if providers is not None else range(len(scenario.providers)):
        for region in scenario.regions:
            parts = parts_by_region[region]
            streams = split(closed_streams(concurrency, requests), parts)
            counts = split(requests, parts) if requests is not None else [None] * parts
            # Running sums, linear in the parts (each part's requests start where the
            # last ended).
            starts = [0, *itertools.accumulate(c or 0 for c in counts[:-1])]
            shards += [
                _shard(run_id, scenario, index, provider_index, region, part, parts).model_copy(
                    update={
                        "concurrency": streams[part],
                        "seq_start": starts[part],
                        "requests": counts[part],
                    }
                )
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
    parts_by_region: Parts,
    providers: Sequence[int] | None = None,
) -> Stage:
    """An open-loop stage, each region's rate dealt to ``parts_by_region[region]`` parts
    (the same for every provider in ``providers``, default all)."""
    shards: list[ShardSpec] = []
    for provider_index in providers if providers is not None else range(len(scenario.providers)):
        for region in scenario.regions:
            parts = parts_by_region[region]
            caps = (
                split(open_cap(max_in_flight, requests), parts)
                if max_in_flight is not None
                else [0] * parts
            )
            # Arrivals are dealt round-robin, so part p sends seqs p, p + P, ...: with N
            # requests that is split(N, P)[p] of them.
            counts = split(requests, parts) if requests is not None else [None] * parts
            shards += [
                _shard(run_id, scenario, index, provider_index, region, part, parts).model_copy(
                    update={
                        "concurrency": caps[part],
                        "seq_start": part,
                        "requests": counts[part],
                        "rate": rate.model_copy(
                            update={
                                "part": part,
                                "parts": parts,
                                "max_in_flight": caps[part] or None,
                            }
                        ),
                    }
                )
                for part in range(parts)
            ]
    return Stage(index, max_in_flight or 0, shards, rate.rps)


def _replay_stage(
    run_id: str,
    scenario: Scenario,
    max_streams_per_shard: int,
    max_rps_per_shard: float,
    times: Sequence[float],
    workers: Mapping[str, int],
) -> Stage:
    replay = scenario.workload.replay
    assert replay is not None
    if not times:
        raise ValueError("a replay is planned from its dataset's timestamps: none given")
    count = len(times)
    if scenario.load.requests_per_level is not None:
        count = min(count, scenario.load.requests_per_level)
    first, last = times[0], times[count - 1]
    span_s = (last - first) * replay.time_scale
    rps = (count - 1) / span_s if count > 1 and span_s > 0 else max_rps_per_shard
    parts = {
        region: open_parts(rps, None, count, max_streams_per_shard, max_rps_per_shard, n)
        for region, n in workers.items()
    }
    check_plan_size(scenario, sum(parts.values()))
    return _open_stage(run_id, scenario, 0, ShardRate(rps=rps, replay=True), None, count, parts)


def scrapes_metrics(provider: Provider, part: int) -> bool:
    """Whether part ``part`` of a stage scrapes the provider's ``metrics_url``: one part
    per provider, region and stage scrapes a server (the parts share it), but every part
    of a simulated provider scrapes its own, as each worker process starts its own."""
    if getattr(provider, "metrics_url", None) is None:
        return False
    return part == 0 or provider.kind == "simulated"


def resets_cache(provider: Provider, part: int) -> bool:
    """Whether part ``part`` of a stage empties the provider's prefix cache before its
    load: one part per provider, region and stage (the parts share the server; the
    reset runs before that part's stage clock), but every part of a simulated provider,
    whose endpoints are per worker process."""
    if getattr(provider, "cache_reset", None) is None:
        return False
    return part == 0 or provider.kind == "simulated"


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
        scrape_metrics=scrapes_metrics(provider, part),
        reset_cache=resets_cache(provider, part),
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
        tag_requests=bool(scenario.upstreams),
    )
