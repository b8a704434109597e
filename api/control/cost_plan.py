"""What a run will cost before it runs: its plan and an upper bound on its cost.

From a validated scenario and the shard plan the control plane would make
(``api/control/planner.py``, reused, never duplicated), per provider and region: shards,
requests, planned prompt tokens, most output tokens and, for a token-priced provider
(``pricing``), an upper bound on its cost:

    prompt tokens ceiling × input price + output tokens ceiling × output price.

How each stage's requests are bounded is stated in the plan (``StageBound.bounded_by``):

- a request (or session) count: ``requests_per_level`` (``sessions_per_level``);
- an adaptive load (sweep, find_capacity): its most stages × ``requests_per_level``;
- an open loop bounded only by ``duration_s``: a ceiling on the arrivals its seeded
  schedule can make in that time: ⌈rate × duration⌉ + 1 for constant gaps, and for
  Poisson or gamma gaps rate × duration plus ten standard deviations of the count
  (variance rate × duration / burstiness) plus ten: the count's chance of exceeding it
  is below 1e-20;
- a replay: its dataset's entries (at most ``requests_per_level``);
- a closed loop bounded only by ``duration_s``: unbounded (its requests depend on the
  endpoint's speed): its cost bound is None, and a budget refuses it.

Per request the prompt ceiling is the largest planned prompt (mix maxima and the shared
prefix; a dataset's longest row in bytes, as no token is shorter than a byte), plus
``PROMPT_SLACK_FRACTION`` and ``PROMPT_SLACK_TOKENS`` for the chat template and the
calibration's error, plus the tool definitions' bytes; a session turn sends the
conversation so far, so turn k's ceiling is k prompts and k - 1 answers (at most
``max_context_tokens``). The output ceiling is the largest ``max_tokens`` asked for.
Images make the bound unbounded (their tokens follow each provider's own rule).

Pure: the dataset figures come in as :class:`DatasetCeiling` (``dataset_ceilings`` reads
them from the dataset store).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from typing import Any

import duckdb

from analytics.datasets.uploads import DatasetStore, UnknownDatasetError, workload_datasets
from api.control.parts import DEFAULT_MAX_RPS_PER_SHARD, DEFAULT_MAX_STREAMS_PER_SHARD
from api.control.planner import plan_run
from scenarios.limits import MAX_TOKENS
from scenarios.model import Scenario
from scenarios.workload.spec import FixedLength, LengthDist, UniformLength, Workload

# Allowance on every planned prompt for what the provider counts beyond the planned
# text: the chat template's tokens and a calibrated prompt's rounding.
PROMPT_SLACK_FRACTION = Fraction(1, 10)
PROMPT_SLACK_TOKENS = 32
# Standard deviations of a random arrival count the duration ceiling adds (1e-20 tail).
ARRIVAL_SIGMAS = 10


@dataclass(frozen=True)
class DatasetCeiling:
    """What bounds the requests a stored dataset makes: its longest row in bytes (a
    ceiling on its prompt tokens) and the largest answer length its rows ask for (None
    when a row has none: the mix's lengths apply)."""

    max_row_bytes: int
    max_output_tokens: int | None
    all_rows_answered: bool


@dataclass(frozen=True)
class StageBound:
    """How one stage's requests per provider and region are bounded."""

    index: int
    requests: int | None  # per provider and region; None: unbounded
    bounded_by: str
    duration_s: float | None  # estimate; None: depends on the endpoint


@dataclass(frozen=True)
class ProviderRegionPlan:
    """One provider in one region: its shards, requests, tokens and cost bound."""

    provider: str
    region: str
    kind: str
    priced: bool
    shards: int
    requests: int | None
    prompt_tokens: int | None
    output_tokens: int | None
    input_per_mtok: float | None
    output_per_mtok: float | None
    cost_bound_usd: float | None  # None: unpriced (no cost) or unbounded (see priced)


@dataclass(frozen=True)
class CostPlan:
    """A run's plan and cost bound, as a dry run answers it."""

    scenario: str
    rows: list[ProviderRegionPlan]
    stages: list[StageBound]
    shards: int
    requests: int | None
    prompt_tokens: int | None
    output_tokens: int | None
    cost_bound_usd: float | None  # over priced providers; None: unbounded
    unbounded: list[str]  # why a priced provider's cost has no bound
    duration_estimate_s: float | None
    max_cost_usd: float | None  # the scenario's budget.max_cost_usd
    notes: list[str] = field(default_factory=list)

    @property
    def priced(self) -> bool:
        """Whether any provider is token-priced (what a budget caps)."""
        return any(row.priced for row in self.rows)

    def to_json(self) -> dict[str, Any]:
        """The plan as JSON (the dry run's ``plan``)."""
        return asdict(self)


def cost_plan(
    scenario: Scenario,
    workers: Mapping[str, int] | None = None,
    replay_times: Sequence[float] = (),
    datasets: Mapping[str, DatasetCeiling] | None = None,
    max_streams_per_shard: int = DEFAULT_MAX_STREAMS_PER_SHARD,
    max_rps_per_shard: float = DEFAULT_MAX_RPS_PER_SHARD,
) -> CostPlan:
    """The plan of ``scenario`` as the control plane would make it (``workers`` live
    worker processes per region, missing or 0: one), with its cost bound."""
    live = {region: max(1, (workers or {}).get(region, 1)) for region in scenario.regions}
    stages = plan_run(
        "dry-run",
        scenario,
        max_streams_per_shard,
        max_rps_per_shard,
        replay_times=replay_times,
        workers=live,
    )
    shards: dict[tuple[str, str], int] = {}
    for stage in stages:
        for spec in stage.shards:
            key = (spec.provider.name, spec.region)
            shards[key] = shards.get(key, 0) + 1
    bounds = stage_bounds(scenario, replay_times)
    units = (
        None if any(b.requests is None for b in bounds) else sum(b.requests or 0 for b in bounds)
    )
    per_request = request_ceiling(scenario.workload, datasets or {})
    sessions = scenario.workload.sessions
    turns = 1 if sessions is None else sessions.max_turns()
    requests = None if units is None else units * turns
    tokens = _unit_tokens(scenario, per_request, turns)
    unbounded: list[str] = []
    rows: list[ProviderRegionPlan] = []
    for provider in scenario.providers:
        pricing = provider.pricing
        for region in scenario.regions:
            prompt = None if units is None or tokens is None else units * tokens[0]
            output = None if units is None or tokens is None else units * tokens[1]
            cost = None
            if pricing is not None and prompt is not None and output is not None:
                # Every prompt token at the full input price, never the cached-input price:
                # a cache hit is not promised (even with workload.prefix_cache), and an
                # upper bound must stay one.
                cost = _usd(prompt, output, pricing.input_per_mtok, pricing.output_per_mtok)
            rows.append(
                ProviderRegionPlan(
                    provider=provider.name,
                    region=region,
                    kind=provider.kind,
                    priced=pricing is not None,
                    shards=shards.get((provider.name, region), 0),
                    requests=requests,
                    prompt_tokens=prompt,
                    output_tokens=output,
                    input_per_mtok=None if pricing is None else pricing.input_per_mtok,
                    output_per_mtok=None if pricing is None else pricing.output_per_mtok,
                    cost_bound_usd=cost,
                )
            )
    if any(row.priced for row in rows):
        if units is None:
            unbounded.append(
                "a closed loop bounded only by load.duration_s sends as many requests as "
                "the endpoint answers: give load.requests_per_level to bound its cost"
            )
        if per_request is None:
            unbounded.append(_unbounded_request(scenario.workload, datasets or {}))
    priced_rows = [row for row in rows if row.priced]
    total_cost = (
        None
        if unbounded
        else _round_up(sum((Fraction(r.cost_bound_usd or 0) for r in priced_rows), Fraction(0)))
    )
    durations = [b.duration_s for b in bounds]
    notes = [
        "prompt ceiling per request: largest planned prompt "
        f"+ {PROMPT_SLACK_FRACTION * 100}% + {PROMPT_SLACK_TOKENS} tokens (chat template, "
        "calibration); output ceiling: the largest max_tokens",
        "a shard re-sent after a lost worker (control.max_attempts) or a retried 429 may "
        "add requests beyond the plan; the recorded spend is still stopped at the budget",
    ]
    return CostPlan(
        scenario=scenario.name,
        rows=rows,
        stages=bounds,
        shards=sum(shards.values()),
        requests=_total(rows, "requests"),
        prompt_tokens=_total(rows, "prompt_tokens"),
        output_tokens=_total(rows, "output_tokens"),
        cost_bound_usd=total_cost,
        unbounded=unbounded,
        duration_estimate_s=None if None in durations else sum(d or 0.0 for d in durations),
        max_cost_usd=None if scenario.budget is None else scenario.budget.max_cost_usd,
        notes=notes,
    )


def stage_bounds(scenario: Scenario, replay_times: Sequence[float] = ()) -> list[StageBound]:
    """Each stage's most requests (sessions with workload.sessions) per provider and
    region, what bounds it, and its duration estimate."""
    load = scenario.load
    units = scenario.units_per_level()
    if scenario.workload.replay is not None:
        count = len(replay_times)
        if load.requests_per_level is not None:
            count = min(count, load.requests_per_level)
        span = 0.0
        if count > 1:
            span = (replay_times[count - 1] - replay_times[0]) * scenario.workload.replay.time_scale
        return [StageBound(0, count, "the replayed dataset's entries", span)]
    if load.adaptive:
        assert load.requests_per_level is not None  # required by Load
        stages = load.max_stages()
        what = "sweep" if load.sweep is not None else "find_capacity"
        return [
            StageBound(
                index,
                load.requests_per_level,
                f"{what}: at most {stages} stages of requests_per_level",
                load.duration_s,
            )
            for index in range(stages)
        ]
    bounds: list[StageBound] = []
    for index, level in enumerate(load.levels()):
        counts: list[tuple[int, str]] = []
        if units is not None:
            name = "sessions_per_level" if scenario.workload.sessions else "requests_per_level"
            counts.append((units, name))
        if load.rate is not None and load.duration_s is not None:
            ceiling = arrival_ceiling(
                level, load.duration_s, load.rate.arrival, load.rate.burstiness
            )
            counts.append((ceiling, f"rate × duration_s ceiling ({load.rate.arrival} arrivals)"))
        duration = load.duration_s
        if duration is None and load.rate is not None and units is not None:
            duration = units / level
        if not counts:
            bounds.append(
                StageBound(index, None, "unbounded: closed loop over duration_s", duration)
            )
            continue
        count, name = min(counts)
        bounds.append(StageBound(index, count, name, duration))
    return bounds


def arrival_ceiling(rps: float, duration_s: float, arrival: str, burstiness: float = 1.0) -> int:
    """Most arrivals an open loop's seeded schedule makes in ``duration_s``: constant
    gaps make at most ⌈rps × duration⌉ (+1 for the arrival at 0); random gaps at most
    the mean plus ``ARRIVAL_SIGMAS`` standard deviations (+ ``ARRIVAL_SIGMAS``)."""
    mean = rps * duration_s
    if arrival == "constant":
        return math.ceil(mean) + 1
    shape = burstiness if arrival == "gamma" else 1.0
    return math.ceil(mean + ARRIVAL_SIGMAS * math.sqrt(mean / shape) + ARRIVAL_SIGMAS)


def length_max(dist: LengthDist) -> int:
    """The largest value a length distribution can draw."""
    if isinstance(dist, FixedLength):
        return dist.value
    if isinstance(dist, UniformLength):
        return dist.max
    return dist.max


def request_ceiling(
    workload: Workload, datasets: Mapping[str, DatasetCeiling]
) -> tuple[int, int] | None:
    """(prompt tokens, output tokens) one request costs at most, slack included; None
    when nothing bounds it (images, a dataset not stored)."""
    if workload.images is not None:
        return None
    prompt = max((length_max(c.prompt_tokens) for c in workload.mix), default=0)
    output = max((length_max(c.output_tokens) for c in workload.mix), default=0)
    sources = [ref for ref in (workload.prompts, workload.replay, workload.dataset) if ref]
    if sources:
        ceilings = []
        for ref in sources:
            found = datasets.get(ref.dataset or "")
            if found is None:
                return None
            ceilings.append(found)
        # A dataset's prompt replaces the mix's; its rows' answer lengths apply, and the
        # mix's for rows without one.
        prompt = max(c.max_row_bytes for c in ceilings)
        asked = [c.max_output_tokens for c in ceilings if c.max_output_tokens is not None]
        fallback = output if workload.mix else MAX_TOKENS
        if all(c.all_rows_answered for c in ceilings):
            output = max(asked, default=fallback)
        else:
            output = max([*asked, fallback])
    prompt += workload.shared_prefix_tokens
    if workload.tools is not None:
        # Tool definitions travel with the request: their JSON's bytes bound their tokens.
        prompt += len(workload.tools.model_dump_json().encode())
    return _slack(prompt), output


def _slack(prompt: int) -> int:
    return math.ceil(prompt * (1 + PROMPT_SLACK_FRACTION)) + PROMPT_SLACK_TOKENS


def _unit_tokens(
    scenario: Scenario, per_request: tuple[int, int] | None, turns: int
) -> tuple[int, int] | None:
    """(prompt, output) tokens one unit (a request, or a session of up to ``turns``
    turns, each sending the conversation so far) costs at most."""
    if per_request is None:
        return None
    prompt, output = per_request
    sessions = scenario.workload.sessions
    if sessions is None:
        return prompt, output
    total = 0
    for turn in range(1, turns + 1):
        total += min(turn * prompt + (turn - 1) * output, sessions.max_context_tokens)
    return total, turns * output


def _usd(prompt: int, output: int, input_per_mtok: float, output_per_mtok: float) -> float:
    exact = (prompt * Fraction(input_per_mtok) + output * Fraction(output_per_mtok)) / 10**6
    return _round_up(exact)


def _round_up(value: Fraction) -> float:
    """``value`` as the nearest float not below it (a bound stays a bound)."""
    approx = float(value)
    return approx if Fraction(approx) >= value else math.nextafter(approx, math.inf)


def _total(rows: Sequence[ProviderRegionPlan], name: str) -> int | None:
    values = [getattr(row, name) for row in rows]
    return None if None in values else sum(values)


def _unbounded_request(workload: Workload, datasets: Mapping[str, DatasetCeiling]) -> str:
    if workload.images is not None:
        return (
            "workload.images: image tokens follow each provider's own rule, so a request's "
            "prompt has no bound here"
        )
    return "the workload's dataset is not stored: its prompt lengths are unknown"


def dataset_ceilings(
    con: duckdb.DuckDBPyConnection, workload: Workload
) -> dict[str, DatasetCeiling]:
    """The :class:`DatasetCeiling` of every stored dataset ``workload`` sends prompts
    from (a tokenizer's is not needed); one pass over each dataset's rows."""
    found: dict[str, DatasetCeiling] = {}
    store = DatasetStore(con)
    for use, dataset_id in workload_datasets(workload):
        if use == "tokenizer" or dataset_id in found:
            continue
        try:
            content = store.content(dataset_id)
        except UnknownDatasetError:
            continue
        found[dataset_id] = ceiling_of(content)
    return found


def ceiling_of(content: bytes) -> DatasetCeiling:
    """A JSONL dataset's longest row in bytes and largest ``max_tokens``/``output_tokens``."""
    longest, asked, answered = 0, None, True
    for line in content.splitlines():
        if not line.strip():
            continue
        longest = max(longest, len(line))
        try:
            row = json.loads(line)
        except ValueError:
            continue
        wanted = None
        if isinstance(row, dict):
            wanted = row.get("max_tokens", row.get("output_tokens"))
        if isinstance(wanted, int) and not isinstance(wanted, bool):
            asked = wanted if asked is None else max(asked, wanted)
        else:
            answered = False
    return DatasetCeiling(longest, asked, answered)


def plan_from_store(
    cursor: duckdb.DuckDBPyConnection,
    scenario: Scenario,
    workers: Mapping[str, int] | None,
    max_streams_per_shard: int,
) -> CostPlan:
    """:func:`cost_plan` with a replay's timestamps and the datasets' ceilings read from
    the dataset store on ``cursor`` (closed afterwards: run it in a worker thread)."""
    try:
        times: list[float] = []
        replay = scenario.workload.replay
        if replay is not None and replay.dataset is not None:
            times = DatasetStore(cursor).replay_times(replay.dataset)
        ceilings = dataset_ceilings(cursor, scenario.workload)
        return cost_plan(scenario, workers, times, ceilings, max_streams_per_shard)
    finally:
        cursor.close()
