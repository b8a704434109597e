"""Deterministic request plans: lengths from the workload mix, prompts of about that size.

Request ``seq`` of stage ``stage`` is the same for every provider and region (it depends
only on the scenario seed), so providers are compared on identical work, and a shard can
be re-run or split without changing what is sent. Prompts come from generated words, a
prompt dataset (cycled in order) or a replayed traffic log (entry ``seq``); all may
start with a shared prefix of N generated tokens for prompt-cache tests.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass

from scenarios.model import (
    FixedLength,
    LengthDist,
    LognormalLength,
    NormalLength,
    UniformLength,
    Workload,
)
from scenarios.workload_files import FileEntry, WorkloadFileError, prompt_text

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


# Characters per token of English text in the usual BPE vocabularies: the planned length
# of a prompt read from a file (the server's count is recorded beside it).
CHARS_PER_TOKEN = 4.0


@dataclass(frozen=True, slots=True)
class PlannedRequest:
    """One request of the plan. ``messages`` is the conversation of a prompt file or
    replay log line (``prompt`` is then its text as one message)."""

    seq: int
    prompt_tokens: int
    output_tokens: int
    prompt: str
    messages: tuple[tuple[str, str], ...] | None = None


def plan_request(
    workload: Workload,
    seed: int,
    stage: int,
    seq: int,
    entries: tuple[FileEntry, ...] | None = None,
) -> PlannedRequest:
    """The request ``seq`` of ``stage``: the same on every worker, provider and region."""
    return request_planner(workload, seed, stage, entries)(seq)


def request_planner(
    workload: Workload, seed: int, stage: int, entries: tuple[FileEntry, ...] | None = None
) -> Callable[[int], PlannedRequest]:
    """``seq -> PlannedRequest`` for one stage. ``entries`` are the parsed lines of the
    workload's dataset (``workload.replay`` or ``workload.prompts``; replay entries in
    timestamp order); this module never reads files."""
    prefix = shared_prefix(workload.shared_prefix_tokens, seed)
    if (workload.replay is not None or workload.prompts is not None) and not entries:
        raise WorkloadFileError("the workload's dataset was not loaded")
    if workload.replay is not None:
        assert entries is not None
        replayed = entries
        return lambda seq: _from_entry(seq, replayed[seq], prefix, replayed[seq].max_tokens or 1)
    prompts = entries if workload.prompts is not None else None

    def plan(seq: int) -> PlannedRequest:
        rng = random.Random(f"{seed}/{stage}/{seq}")  # str seeds hash with SHA-512: stable
        weights = [mix_class.weight for mix_class in workload.mix]
        mix_class = rng.choices(workload.mix, weights=weights)[0]
        prompt_tokens = sample_length(mix_class.prompt_tokens, rng)
        output_tokens = sample_length(mix_class.output_tokens, rng)
        if prompts is not None:
            entry = prompts[seq % len(prompts)]
            return _from_entry(seq, entry, prefix, entry.max_tokens or output_tokens)
        if prefix is None:
            return PlannedRequest(
                seq, prompt_tokens, output_tokens, make_prompt(prompt_tokens, rng)
            )
        text, tokens = prefix
        rest = max(prompt_tokens - tokens, 1)  # a unique tail, so requests stay distinct
        prompt = f"{text} {make_prompt(rest, rng)}"
        return PlannedRequest(seq, tokens + rest, output_tokens, prompt)

    return plan


def shared_prefix(tokens: int, seed: int) -> tuple[str, int] | None:
    """The run's common prompt prefix and its length, or None without one."""
    if tokens == 0:
        return None
    return make_prompt(tokens, random.Random(f"{seed}/shared-prefix")), tokens


def estimate_tokens(text: str) -> int:
    """Planned token count of text not generated by us (about 4 characters a token)."""
    return max(1, round(len(text) / CHARS_PER_TOKEN))


def _from_entry(
    seq: int, entry: FileEntry, prefix: tuple[str, int] | None, output_tokens: int
) -> PlannedRequest:
    messages = entry.messages
    planned = estimate_tokens(prompt_text(messages))
    if prefix is not None:
        # The prefix goes in front of the first message, where a prompt cache matches.
        (role, content), *rest = messages
        messages = ((role, f"{prefix[0]} {content}"), *rest)
        planned += prefix[1]
    return PlannedRequest(seq, planned, output_tokens, prompt_text(messages), messages)


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
