"""Deterministic request plans: lengths from the workload mix, prompts of about that size.

Request ``seq`` of stage ``stage`` is the same for every provider and region (it depends
only on the scenario seed), so providers are compared on identical work, and a shard can
be re-run or split without changing what is sent.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from scenarios.model import (
    FixedLength,
    LengthDist,
    LognormalLength,
    NormalLength,
    UniformLength,
    Workload,
)

# Common English words that are one token each in the usual BPE vocabularies (with their
# leading space), so a prompt of n words is close to n tokens for most tokenizers.
_WORDS = (
    "the of and to in is was for on that with as by at from his an were are which "
    "this be had not have one their has but first new all two they other been after "
    "who its more time used also when into only there city most school year over "
    "three out can up some world people would state so between then during her where "
    "about work these war well game what part many while no him under river may early "
    "such music through being since national before house name known later film four "
    "both made group because life them each high north back several family south five "
    "area like album government until team series released any season three called "
    "along based own major against found end long second we could same while top day "
    "near line did old small around main power town including place much last county "
    "book number following just country west large play again way few system east "
    "take still less field way set often late song road "
).split()


@dataclass(frozen=True, slots=True)
class PlannedRequest:
    """One request of the plan."""

    seq: int
    prompt_tokens: int
    output_tokens: int
    prompt: str


def plan_request(workload: Workload, seed: int, stage: int, seq: int) -> PlannedRequest:
    """The request ``seq`` of ``stage``: the same on every worker, provider and region."""
    rng = random.Random(f"{seed}/{stage}/{seq}")  # str seeds hash with SHA-512: stable
    weights = [mix_class.weight for mix_class in workload.mix]
    mix_class = rng.choices(workload.mix, weights=weights)[0]
    prompt_tokens = sample_length(mix_class.prompt_tokens, rng)
    output_tokens = sample_length(mix_class.output_tokens, rng)
    return PlannedRequest(seq, prompt_tokens, output_tokens, make_prompt(prompt_tokens, rng))


def sample_length(dist: LengthDist, rng: random.Random) -> int:
    """Draw one length (tokens) from ``dist``."""
    match dist:
        case FixedLength(value=value):
            return value
        case UniformLength(min=low, max=high):
            return rng.randint(low, high)
        case NormalLength(mean=mean, std=std, min=low, max=high):
            return _clip(round(rng.gauss(mean, std)), low, high)
        case LognormalLength(mean=mean, sigma=sigma, min=low, max=high):
            mu = math.log(mean) - sigma * sigma / 2  # so that E[length] == mean
            return _clip(round(rng.lognormvariate(mu, sigma)), low, high)
    raise TypeError(f"unknown length distribution {dist!r}")


def make_prompt(tokens: int, rng: random.Random) -> str:
    """About ``tokens`` tokens of text (one common word per token)."""
    return " ".join(rng.choices(_WORDS, k=tokens))


def _clip(value: int, low: int, high: int) -> int:
    return max(low, min(high, value))
