"""The capacity search (``load.find_capacity``, docs/answers.md): pure decisions.

A provider's search is a sequence of stages; each is judged once it settled:

- ``pass`` when the Wilson interval of its SLO attainment lies at or above the target,
  ``fail`` when it lies below (or the stage was over-saturated), ``undecided`` otherwise,
  which counts as not holding: the answer is a load shown to hold, with confidence;
- the bracket is ``[low, high)``: ``low`` the highest load that passed, ``high`` the
  lowest that did not (a pass above a failure is noise and does not raise ``low``);
- by rate, the synchronous stage's rate and the throughput stage's rate bound the first
  bracket (assumed, not yet verified); each next probe is the bracket's geometric middle,
  and an assumed bound is probed itself before the search may end on it. A pass at the
  assumed top doubles it (up to ``max_rps``); a failure at the assumed bottom halves it
  (down to ``MIN_SEARCH_RPS``);
- by concurrency, it doubles from one stream until a failure, then bisects integers;
- it ends when both bounds are verified and ``high ≤ low × (1 + precision)`` (by
  concurrency: ``high − low ≤ max(1, precision × low)``), or after ``max_stages``.

Everything here is a function of the stages' results, so a restarted control plane
decides exactly what the first one would have (the results are stored).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal

from scenarios.limits import MAX_CONCURRENCY, MAX_RPS, MIN_SEARCH_RPS
from scenarios.load.adaptive import FindCapacity

__all__ = [
    "Probe",
    "Role",
    "SearchState",
    "Verdict",
    "interim_alpha",
    "next_step",
    "provider_verdict",
    "region_verdict",
    "wilson",
]

Verdict = Literal["pass", "fail", "undecided"]
Role = Literal["synchronous", "throughput", "sweep", "probe"]
State = Literal["searching", "converged", "max_stages", "unattainable", "at_max", "failed"]


def wilson(met: int, n: int, confidence: float) -> tuple[float, float]:
    """Wilson score interval of a proportion ``met / n`` at ``confidence`` (two-sided);
    (0, 1) when there is no request."""
    if n <= 0:
        return 0.0, 1.0
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p = met / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def region_verdict(met: int, n: int, target: float, confidence: float) -> Verdict:
    """``pass`` when the interval lies at or above ``target``, ``fail`` below it."""
    low, high = wilson(met, n, confidence)
    if n > 0 and low >= target:
        return "pass"
    if n > 0 and high < target:
        return "fail"
    return "undecided"


def provider_verdict(regions: Sequence[Verdict], saturated: bool = False) -> Verdict:
    """A provider's verdict over its regions: it holds only where every region holds;
    an over-saturated stage fails whatever its attainment."""
    if saturated or "fail" in regions:
        return "fail"
    if regions and all(v == "pass" for v in regions):
        return "pass"
    return "undecided"


def interim_alpha(look: int, confidence: float) -> float:
    """The error a stage's ``look``-th early decision may spend (look ≥ 1): α/2^(look+1),
    so the early looks and the final verdict (α/2) together never exceed α = 1 −
    ``confidence``, however many looks a stage takes."""
    return float((1 - confidence) / 2 ** (look + 1))


@dataclass(frozen=True, slots=True)
class Probe:
    """One settled stage of a provider's search."""

    stage: int
    role: Role
    level: float  # req/s (by rate) or streams (by concurrency)
    verdict: Verdict | None  # None: not judged (the throughput stage)
    measured_rps: float | None  # successful requests per second, mean over regions


@dataclass(frozen=True, slots=True)
class SearchState:
    """Where a search stands after its stages so far, and its next probe if any."""

    state: State
    low: float | None
    high: float | None
    low_stage: int | None
    high_stage: int | None
    next_level: float | None
    message: str

    @property
    def done(self) -> bool:
        """True when the search decides no more stages."""
        return self.next_level is None


def _round(value: float) -> float:
    """Four significant digits: probes a reader can name, never the same twice in a
    search whose precision is at least 0.1 %."""
    if value <= 0:
        return value
    return round(value, 3 - math.floor(math.log10(value)))


@dataclass(frozen=True, slots=True)
class _Bracket:
    low: Probe | None
    high: Probe | None


def _bracket(probes: Sequence[Probe]) -> _Bracket:
    """Highest pass below the lowest non-pass among the probe stages."""
    judged = [p for p in probes if p.role == "probe" and p.verdict is not None]
    failing = [p for p in judged if p.verdict != "pass"]
    high = min(failing, key=lambda p: p.level, default=None)
    passing = [p for p in judged if p.verdict == "pass" and (high is None or p.level < high.level)]
    low = max(passing, key=lambda p: p.level, default=None)
    return _Bracket(low, high)


def next_step(config: FindCapacity, probes: Sequence[Probe]) -> SearchState:
    """The search's state after ``probes`` (its settled stages, in order) and what to
    probe next (``next_level``; None once it ended)."""
    if not probes:
        raise ValueError("a search starts with its synchronous stage")
    sync = probes[0]
    if sync.verdict == "fail":
        return _ended("unattainable", None, None, _unattainable(sync))
    if sync.measured_rps is None:
        return _ended("failed", None, None, "the synchronous stage had no successful request")
    if config.by == "concurrency":
        return _by_concurrency(config, probes)
    return _by_rate(config, probes)


def _unattainable(sync: Probe) -> str:
    return (
        f"does not hold the SLO even at one stream (stage {sync.stage}): the objective is "
        "below what the endpoint does unloaded"
    )


def _ended(
    state: State, low: Probe | None, high: Probe | None, message: str, value: float | None = None
) -> SearchState:
    return SearchState(
        state,
        value if value is not None else (low.level if low else None),
        high.level if high else None,
        low.stage if low else None,
        high.stage if high else None,
        None,
        message,
    )


def _searching(bracket: _Bracket, level: float, why: str) -> SearchState:
    low, high = bracket.low, bracket.high
    return SearchState(
        "searching",
        low.level if low else None,
        high.level if high else None,
        low.stage if low else None,
        high.stage if high else None,
        level,
        why,
    )


def _budget_left(config: FindCapacity, probes: Sequence[Probe]) -> bool:
    return len(probes) < config.max_stages


def _by_rate(config: FindCapacity, probes: Sequence[Probe]) -> SearchState:
    if len(probes) < 2:
        raise ValueError("a search by rate has a throughput stage after its synchronous one")
    sync_rps = probes[0].measured_rps or 0.0
    throughput = probes[1].measured_rps
    if throughput is None:
        return _ended("failed", None, None, "the throughput stage had no successful request")
    top = config.max_rps or MAX_RPS
    bracket = _bracket(probes)
    tried = {p.level for p in probes if p.role == "probe"}
    low = bracket.low.level if bracket.low else None
    high = bracket.high.level if bracket.high else None
    low_bound, high_bound = _rate_bounds(config, probes, low, high, sync_rps, throughput, top)
    close = high_bound <= low_bound * (1 + config.precision)
    if low is not None and high is not None and close:
        return _ended(
            "converged",
            bracket.low,
            bracket.high,
            f"holds {low:g} req/s; does not hold {high:g} req/s",
        )
    if low is not None and high is None and low >= top:
        return _ended("at_max", bracket.low, None, f"holds {low:g} req/s, the most it may probe")
    if high is not None and high <= MIN_SEARCH_RPS:
        return _ended(
            "unattainable",
            None,
            bracket.high,
            f"does not hold the SLO at any rate probed, down to {high:g} req/s",
        )
    if not _budget_left(config, probes):
        return _ended(
            "max_stages",
            bracket.low,
            bracket.high,
            f"stopped after {config.max_stages} stages (find_capacity.max_stages)",
        )
    if close:
        # The bracket is narrow but rests on an assumed bound: probe that bound itself.
        level = _round(high_bound if high is None else max(low_bound, MIN_SEARCH_RPS))
        why = "verify the upper bound" if high is None else "verify the lower bound"
    else:
        level = _round(math.sqrt(max(low_bound, MIN_SEARCH_RPS) * high_bound))
        why = f"bisect {low_bound:.4g}–{high_bound:.4g} req/s"
    if level in tried:
        # Rounding cannot narrow the bracket further: it is as precise as it gets.
        return _ended("converged", bracket.low, bracket.high, "the bracket cannot narrow further")
    return _searching(bracket, level, why)


def _rate_bounds(
    config: FindCapacity,
    probes: Sequence[Probe],
    low: float | None,
    high: float | None,
    sync_rps: float,
    throughput: float,
    top: float,
) -> tuple[float, float]:
    """The bracket's bounds, assumed where not yet probed: the synchronous rate below (a
    quarter of the lowest failure when even that failed), the throughput rate (at least
    a step above the synchronous one) above, or twice the highest pass once it passed."""
    sync_rps = _round(sync_rps)  # compared with probes, which are rounded
    if low is not None:
        low_bound = low
    else:
        low_bound = sync_rps if high is None or sync_rps < high else high / 4
    if high is not None:
        return low_bound, high
    passes = [p.level for p in probes if p.verdict == "pass" and p.role == "probe"]
    highest_pass = max(passes, default=0.0)
    # Rounded as probes are, so a probe of the assumed bound itself counts as reaching it.
    assumed = _round(max(throughput, sync_rps * (1 + 2 * config.precision)))
    return low_bound, min(top, 2 * highest_pass if highest_pass >= assumed else assumed)


def _by_concurrency(config: FindCapacity, probes: Sequence[Probe]) -> SearchState:
    top = min(config.throughput_concurrency, MAX_CONCURRENCY)
    bracket = _bracket(probes)
    tried = {p.level for p in probes}
    sync = probes[0]
    low = bracket.low.level if bracket.low else (1.0 if sync.verdict == "pass" else None)
    low_probe = bracket.low or (sync if sync.verdict == "pass" else None)
    high = bracket.high.level if bracket.high else None
    if low is not None and high is not None and high - low <= max(1.0, config.precision * low):
        return _ended(
            "converged",
            low_probe,
            bracket.high,
            f"holds {low:g} streams; does not hold {high:g}",
        )
    if high is not None and high <= 1:
        return _ended("unattainable", None, bracket.high, _unattainable(sync))
    if low is not None and high is None and low >= top:
        return _ended("at_max", low_probe, None, f"holds {low:g} streams, the most it may probe")
    if not _budget_left(config, probes):
        return _ended(
            "max_stages",
            low_probe,
            bracket.high,
            f"stopped after {config.max_stages} stages (find_capacity.max_stages)",
        )
    base = low or 1.0
    if high is None:
        level = float(min(top, 2 * base))
        why = f"double from {base:g} streams"
    else:
        level = float(math.floor((base + high) / 2))
        why = f"bisect {base:g}–{high:g} streams"
    if level in tried or (level <= base and high is not None):
        return _ended("converged", low_probe, bracket.high, "the bracket cannot narrow further")
    return _searching(_Bracket(low_probe, bracket.high), level, why)
