"""Deterministic request plans: lengths from the workload mix, prompts of that size.

Request ``seq`` of stage ``stage`` has the same lengths for every provider and region
(they depend only on the scenario seed), so providers are compared on identical work,
and a shard can be re-run or split without changing what is sent. Prompts come from
generated words, a prompt dataset (cycled in order) or a replayed traffic log (entry
``seq``); all may start with a shared prefix of N generated tokens for prompt-cache
tests. A :class:`PromptMaker` sizes generated prompts: one word per token
(:class:`WordPrompts`), exactly with the workload's tokenizer
(``workers/prompts/exact.py``) or calibrated from the server's counts
(``workers/prompts/calibration.py``); docs/lengths.md.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from scenarios.datasets.files import FileEntry, WorkloadFileError, prompt_text
from scenarios.workload.spec import (
    FixedLength,
    LengthDist,
    LognormalLength,
    NormalLength,
    UniformLength,
    Workload,
)
from workers.prompts.dataset_requests import DatasetRow, DatasetRows, prepare_rows
from workers.prompts.images import ImagePool, RequestImages, image_pool

# Common English words that are one token each in the usual BPE vocabularies (with their
# leading space), so a prompt of n words is close to n tokens for most tokenizers.
WORDS = (
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
    replay log line (``prompt`` is then its text as one message). ``prompt_source`` says
    how ``prompt_tokens`` was made true (docs/lengths.md): ``tokenizer`` (counted),
    ``calibrated`` (words scaled by ``tokens_per_word`` and ``template_tokens`` measured
    from the server), ``warmup`` (one word a token while calibrating), ``words`` (one
    word a token) or ``estimate`` (a file's text at 4 characters a token)."""

    seq: int
    prompt_tokens: int
    output_tokens: int
    prompt: str
    messages: tuple[tuple[str, str], ...] | None = None
    prompt_source: str = "words"
    tokens_per_word: float | None = None
    template_tokens: float | None = None
    tools: ToolSet | None = None  # tools offered with this request (workload.tools)
    session: SessionTurn | None = None  # the turn of a multi-turn session this request is
    images: RequestImages | None = None  # images sent with this request (workload.images)
    # The uploaded dataset the prompt came from and its row in the file (docs/workloads.md).
    dataset_id: str | None = None
    dataset_row: int | None = None
    # The id sent with the request when the run's upstreams log it (workers/client/request_ids.py).
    request_id: str | None = None
    # Prompt tokens built to repeat a prefix already sent (a workload's target prefix-cache
    # hit rate, docs/workloads.md); None when the workload sets no target.
    cached_prefix_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class SessionTurn:
    """Where a request stands in its session (docs/workloads.md): ``turn`` counts from 1
    of the ``turns`` planned; ``context_tokens`` are the earlier turns' tokens sent with it
    (user messages as planned, answers as counted); ``answer_chars`` is how much of the
    answer's text to keep for the next turn (0: none); ``end`` is set on the session's last
    turn: ``done``, ``error``, ``context_cap`` or ``stage_end``."""

    session_id: int
    turn: int
    turns: int
    context_tokens: int
    answer_chars: int = 0
    end: str | None = None


@dataclass(frozen=True, slots=True)
class ToolSet:
    """The ``tools`` and ``tool_choice`` of requests that carry tools (one per run)."""

    tools: list[dict[str, Any]]
    tool_choice: str | dict[str, Any]


@dataclass(frozen=True, slots=True)
class PromptText:
    """A generated prompt, its planned tokens and how they were made true."""

    text: str
    tokens: int
    source: str
    tokens_per_word: float | None = None
    template_tokens: float | None = None


class RepeatedText:
    """A stage's repeated text (``workload.prefix_cache``): an endless seeded sequence of
    one vocabulary's words, made as far as asked. Its first n words are the same for
    every request, worker and region of the stage, so a prompt that starts with them
    repeats what the stage's earlier requests sent, and a longer cut extends a shorter."""

    __slots__ = ("_rng", "_vocabulary", "_words")

    def __init__(self, vocabulary: tuple[str, ...], key: str) -> None:
        self._vocabulary = vocabulary
        self._rng = random.Random(key)  # str seeds hash with SHA-512: stable
        self._words: list[str] = []

    def text(self, words: int) -> str:
        """The first ``words`` words (at least one). Successive ``choices`` draws are one
        sequence, so extending never changes the words already made."""
        words = max(words, 1)
        if words > len(self._words):
            self._words += self._rng.choices(self._vocabulary, k=words - len(self._words))
        return " ".join(self._words[:words])


class PromptMaker(Protocol):
    """How generated prompts are sized, and file prompts counted."""

    @property
    def vocabulary(self) -> tuple[str, ...]:
        """The words generated prompts are made of."""

    def prompt(self, tokens: int, rng: random.Random, prefix: str = "") -> PromptText:
        """A prompt planned as ``tokens`` tokens that starts with ``prefix``."""

    def prefix(self, tokens: int, seed: int) -> str:
        """The run's shared prefix of ``tokens`` tokens."""

    def count(self, text: str) -> int | None:
        """Exact tokens of a file's text, or None when only an estimate is possible."""

    def repeated(self, tokens: int, text: RepeatedText) -> str:
        """The start of the stage's repeated ``text`` planned as ``tokens`` tokens."""


class WordPrompts:
    """One common word per planned token (no tokenizer, no calibration)."""

    vocabulary = tuple(WORDS)

    def prompt(self, tokens: int, rng: random.Random, prefix: str = "") -> PromptText:
        """Words: the prefix's and ``tokens`` minus those (at least one)."""
        tail = make_prompt(max(tokens - len(prefix.split()), 1), rng)
        return PromptText(f"{prefix} {tail}" if prefix else tail, tokens, "words")

    def prefix(self, tokens: int, seed: int) -> str:
        """``tokens`` words, the same for the whole run."""
        return make_prompt(tokens, random.Random(f"{seed}/shared-prefix"))

    def count(self, text: str) -> int | None:
        """Unknown: file text is estimated."""
        return None

    def repeated(self, tokens: int, text: RepeatedText) -> str:
        """One word per token."""
        return text.text(tokens)


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
    workload: Workload,
    seed: int,
    stage: int,
    entries: tuple[FileEntry, ...] | None = None,
    maker: PromptMaker | None = None,
    rows: DatasetRows | None = None,
    images: ImagePool | None = None,
) -> Callable[[int], PlannedRequest]:
    """``seq -> PlannedRequest`` for one stage. ``entries`` are the parsed lines of the
    workload's dataset (``workload.replay``, ``.prompts`` or ``.dataset``; replay entries
    in timestamp order); this module never reads files. ``maker`` sizes the prompts
    (default: one word per token). ``rows`` are ``workload.dataset``'s rows already
    counted and filtered (:func:`dataset_rows`; counted here when not given). ``images``
    is the run's image pool (a shard prepares it off the event loop; without it, it is
    generated here)."""
    maker = maker or WordPrompts()
    if workload.dataset is not None:
        plan = _dataset_planner(workload, seed, stage, entries, maker, rows)
    else:
        plan = _request_planner(workload, seed, stage, entries, maker)
    return _with_images(_with_tools(plan, workload, seed, stage), workload, seed, stage, images)


def _with_tools(
    plan: Callable[[int], PlannedRequest], workload: Workload, seed: int, stage: int
) -> Callable[[int], PlannedRequest]:
    spec = workload.tools
    if spec is None or spec.fraction == 0:
        return plan
    tool_set, fraction = ToolSet(spec.tools(), spec.choice()), spec.fraction

    def with_tools(seq: int) -> PlannedRequest:
        request = plan(seq)
        # Its own seeded draw, so that adding tools changes no request's lengths or text.
        if fraction >= 1 or random.Random(f"{seed}/{stage}/{seq}/tools").random() < fraction:
            return replace(request, tools=tool_set)
        return request

    return with_tools


def _with_images(
    plan: Callable[[int], PlannedRequest],
    workload: Workload,
    seed: int,
    stage: int,
    pool: ImagePool | None,
) -> Callable[[int], PlannedRequest]:
    spec = workload.images
    if spec is None or spec.fraction == 0:
        return plan
    images = pool or image_pool(spec, seed)
    fraction, count = spec.fraction, spec.count

    def with_images(seq: int) -> PlannedRequest:
        request = plan(seq)
        # Its own seeded draws, so that adding images changes no request's lengths or text.
        rng = random.Random(f"{seed}/{stage}/{seq}/images")
        if fraction < 1 and rng.random() >= fraction:
            return request
        n = count if isinstance(count, int) else rng.randint(count.min, count.max)
        return replace(request, images=images.for_request(seq, n))

    return with_images


def _request_planner(
    workload: Workload,
    seed: int,
    stage: int,
    entries: tuple[FileEntry, ...] | None,
    maker: PromptMaker,
) -> Callable[[int], PlannedRequest]:
    prefix_tokens = workload.shared_prefix_tokens
    if (workload.replay is not None or workload.prompts is not None) and not entries:
        raise WorkloadFileError("the workload's dataset was not loaded")
    if workload.replay is not None:
        assert entries is not None
        replayed, replay_id = entries, workload.replay.dataset
        return lambda seq: plan_from_entry(
            seq, replayed[seq], maker, seed, prefix_tokens, replayed[seq].max_tokens or 1, replay_id
        )
    prompts = entries if workload.prompts is not None else None
    prompts_id = None if workload.prompts is None else workload.prompts.dataset
    target = None if workload.prefix_cache is None else workload.prefix_cache.target_hit_rate
    # The stage's own text: its first request seeds it (a stage starts cold).
    repeated = (
        None if target is None else RepeatedText(maker.vocabulary, f"{seed}/{stage}/prefix-cache")
    )

    def plan(seq: int) -> PlannedRequest:
        rng = random.Random(f"{seed}/{stage}/{seq}")  # str seeds hash with SHA-512: stable
        weights = [mix_class.weight for mix_class in workload.mix]
        mix_class = rng.choices(workload.mix, weights=weights)[0]
        prompt_tokens = sample_length(mix_class.prompt_tokens, rng)
        output_tokens = sample_length(mix_class.output_tokens, rng)
        if prompts is not None:
            entry = prompts[seq % len(prompts)]
            return plan_from_entry(
                seq,
                entry,
                maker,
                seed,
                prefix_tokens,
                entry.max_tokens or output_tokens,
                prompts_id,
            )
        if target is not None and repeated is not None:
            return _repeating(seq, prompt_tokens, output_tokens, target, maker, rng, repeated)
        prefix = maker.prefix(prefix_tokens, seed) if prefix_tokens else ""
        # A unique tail after a shared prefix, so requests stay distinct.
        tokens = max(prompt_tokens, prefix_tokens + 1) if prefix else prompt_tokens
        made = maker.prompt(tokens, rng, prefix)
        return PlannedRequest(
            seq,
            made.tokens,
            output_tokens,
            made.text,
            prompt_source=made.source,
            tokens_per_word=made.tokens_per_word,
            template_tokens=made.template_tokens,
        )

    return plan


def repeated_share(prompt_tokens: int, target: float) -> int:
    """Tokens of a prompt of ``prompt_tokens`` that repeat the stage's text for a target
    hit rate ``target``: the nearest whole token, leaving at least one token its own."""
    return max(min(round(target * prompt_tokens), prompt_tokens - 1), 0)


def _repeating(
    seq: int,
    prompt_tokens: int,
    output_tokens: int,
    target: float,
    maker: PromptMaker,
    rng: random.Random,
    repeated: RepeatedText,
) -> PlannedRequest:
    """A generated prompt whose first :func:`repeated_share` tokens are the stage's
    repeated text and the rest its own words. Planned as cached: that share, except for
    the stage's first request, which seeds the text (a miss)."""
    share = repeated_share(prompt_tokens, target)
    prefix = maker.repeated(share, repeated) if share else ""
    made = maker.prompt(prompt_tokens, rng, prefix)
    return PlannedRequest(
        seq,
        made.tokens,
        output_tokens,
        made.text,
        prompt_source=made.source,
        tokens_per_word=made.tokens_per_word,
        template_tokens=made.template_tokens,
        cached_prefix_tokens=0 if seq == 0 else share,
    )


def estimate_tokens(text: str) -> int:
    """Planned token count of text not generated by us (about 4 characters a token)."""
    return max(1, round(len(text) / CHARS_PER_TOKEN))


def plan_from_entry(
    seq: int,
    entry: FileEntry,
    maker: PromptMaker,
    seed: int,
    prefix_tokens: int,
    output_tokens: int,
    dataset_id: str | None = None,
) -> PlannedRequest:
    """Request ``seq`` from a prompt file's, dataset's or replay log's line: its
    conversation (the shared prefix in front of the first message), counted by ``maker``
    or estimated; ``dataset_id`` and the line's row say where it came from."""
    return _from_messages(
        seq, entry.messages, maker, seed, prefix_tokens, output_tokens, dataset_id, entry.row
    )


def _from_messages(
    seq: int,
    messages: tuple[tuple[str, str], ...],
    maker: PromptMaker,
    seed: int,
    prefix_tokens: int,
    output_tokens: int,
    dataset_id: str | None,
    row: int | None,
    known_tokens: int | None = None,
) -> PlannedRequest:
    """A request sending ``messages`` (a file's text); ``known_tokens`` is their length
    as already counted, without the prefix."""
    own = messages
    if prefix_tokens:
        # The prefix goes in front of the first message, where a prompt cache matches.
        (role, content), *rest = messages
        messages = ((role, f"{maker.prefix(prefix_tokens, seed)} {content}"), *rest)
    text = prompt_text(messages)
    counted = known_tokens if known_tokens is not None and not prefix_tokens else None
    counted = counted if counted is not None else maker.count(text)
    source = "tokenizer"
    if counted is None:
        counted, source = estimate_tokens(prompt_text(own)) + prefix_tokens, "estimate"
    return PlannedRequest(
        seq,
        max(counted, 1),
        output_tokens,
        text,
        messages,
        prompt_source=source,
        dataset_id=dataset_id,
        dataset_row=row,
    )


def dataset_rows(
    workload: Workload, entries: tuple[FileEntry, ...], maker: PromptMaker
) -> DatasetRows:
    """``workload.dataset``'s rows of ``entries``: counted with ``maker`` (the workload's
    tokenizer, else 4 characters a token) and filtered. Costs a count of every row:
    workers call it off the event loop, once per dataset and tokenizer."""
    spec = workload.dataset
    assert spec is not None

    def count(texts: list[str]) -> list[int] | None:
        many = getattr(maker, "count_many", None)  # a tokenizer counts a batch at once
        if many is not None:
            counted: list[int] = many(texts)
            return counted
        if not texts or maker.count(texts[0]) is None:
            return None  # no tokenizer: every text is estimated
        single = [maker.count(text) for text in texts]
        return [n for n in single if n is not None] if None not in single else None

    return prepare_rows(spec.dataset or "", entries, spec, count, estimate_tokens, not workload.mix)


def _dataset_planner(
    workload: Workload,
    seed: int,
    stage: int,
    entries: tuple[FileEntry, ...] | None,
    maker: PromptMaker,
    rows: DatasetRows | None,
) -> Callable[[int], PlannedRequest]:
    spec = workload.dataset
    assert spec is not None
    if rows is None:
        if not entries:
            raise WorkloadFileError("the workload's dataset was not loaded")
        rows = dataset_rows(workload, entries, maker)
    kept, prefix_tokens = rows, workload.shared_prefix_tokens
    weights = [mix_class.weight for mix_class in workload.mix]
    counted = kept.counted_with == "tokenizer"

    def plan(seq: int) -> PlannedRequest:
        drawn: tuple[int, int] | None = None
        if workload.mix:
            # The same draws as a generated prompt of this seed, stage and request.
            rng = random.Random(f"{seed}/{stage}/{seq}")
            mix_class = rng.choices(workload.mix, weights=weights)[0]
            drawn = (
                sample_length(mix_class.prompt_tokens, rng),
                sample_length(mix_class.output_tokens, rng),
            )
        row: DatasetRow
        if spec.sample == "mix":
            assert drawn is not None  # the scenario model requires a mix
            target = max(drawn[0] - prefix_tokens, 1)
            row = kept.nearest(target, random.Random(f"{seed}/{stage}/{seq}/row"))
            output = drawn[1]
        else:
            row = kept.pick(spec, seed, seq)
            output = row.output_tokens if row.output_tokens is not None else 0
            if row.output_tokens is None:
                assert drawn is not None  # rows without answers need the mix
                output = drawn[1]
        return _from_messages(
            seq,
            row.messages,
            maker,
            seed,
            prefix_tokens,
            output,
            kept.dataset_id or None,
            row.row,
            row.prompt_tokens if counted else None,
        )

    return plan


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
    return " ".join(rng.choices(WORDS, k=tokens))


def _clip(value: int, low: int, high: int) -> int:
    return max(low, min(high, value))
