"""Which dataset row each request uses (``workload.dataset``, docs/workloads.md).

A row is one request as ``vllm bench serve`` uses ShareGPT: the turns up to the first
user turn are the prompt, the answer right after it gives the output length (else the
row's ``max_tokens``; else the mix). Rows are counted once per dataset and tokenizer —
with the workload's tokenizer when it has one, else at 4 characters a token — and kept
when they pass ``filters``. Then, for request ``seq``:

- ``sample: dataset``: the kept rows in a seeded shuffle, each once before any repeats
  (a new shuffle each cycle), or with ``replacement`` an independent seeded draw. The
  same rows in the same order at every stage, so load levels see the same work.
- ``sample: mix``: the mix draws the request's lengths as for generated prompts (the
  same draws for the same seed); the row whose prompt length is nearest the drawn one
  is used (a seeded choice among equally near rows), with the drawn answer length.

Pure functions of the entries, the counts and the seed: every worker, provider and
region plans the same rows.
"""

from __future__ import annotations

import bisect
import random
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from scenarios.datasets.files import FileEntry, WorkloadFileError, first_turn, prompt_text
from scenarios.datasets.spec import DatasetWorkload

__all__ = ["DatasetRow", "DatasetRows", "prepare_rows"]

Message = tuple[str, str]
# Shuffles kept per dataset (a shard's requests run through one or two cycles at a time).
_PERMUTATIONS_KEPT = 2


@dataclass(frozen=True, slots=True)
class DatasetRow:
    """A kept row: its prompt turns, their length, and its answer length if it has one."""

    row: int
    messages: tuple[Message, ...]
    prompt_tokens: int
    output_tokens: int | None


class DatasetRows:
    """The rows of one dataset a workload keeps, counted one way, ready to be sampled."""

    def __init__(
        self, dataset_id: str, rows: tuple[DatasetRow, ...], counted_with: str, dropped: int
    ) -> None:
        self.dataset_id = dataset_id
        self.rows = rows
        self.counted_with = counted_with  # tokenizer | estimate
        self.dropped = dropped
        self._order = sorted(range(len(rows)), key=lambda i: (rows[i].prompt_tokens, i))
        self._lengths = [rows[i].prompt_tokens for i in self._order]
        self._permutations: OrderedDict[tuple[int, int], list[int]] = OrderedDict()

    def shuffled(self, seed: int, seq: int) -> DatasetRow:
        """Request ``seq``'s row of a seeded shuffle, every row once per cycle."""
        cycle, position = divmod(seq, len(self.rows))
        key = (seed, cycle)
        order = self._permutations.get(key)
        if order is None:
            order = list(range(len(self.rows)))
            random.Random(f"{seed}/dataset/{cycle}").shuffle(order)
            self._permutations[key] = order
            while len(self._permutations) > _PERMUTATIONS_KEPT:
                self._permutations.popitem(last=False)
        return self.rows[order[position]]

    def drawn(self, seed: int, seq: int) -> DatasetRow:
        """Request ``seq``'s row, an independent seeded draw (with replacement)."""
        return self.rows[random.Random(f"{seed}/dataset/{seq}").randrange(len(self.rows))]

    def nearest(self, prompt_tokens: int, rng: random.Random) -> DatasetRow:
        """A row whose prompt length is nearest ``prompt_tokens`` (``rng`` chooses among
        equally near ones)."""
        lengths = self._lengths
        at = bisect.bisect_left(lengths, prompt_tokens)
        gaps = [lengths[i] - prompt_tokens for i in (at,) if i < len(lengths)]
        gaps += [prompt_tokens - lengths[i] for i in (at - 1,) if i >= 0]
        gap = min(gaps)
        low = bisect.bisect_left(lengths, prompt_tokens - gap)
        high = bisect.bisect_right(lengths, prompt_tokens + gap)
        return self.rows[self._order[rng.randrange(low, high)]]

    def pick(self, spec: DatasetWorkload, seed: int, seq: int) -> DatasetRow:
        """Request ``seq``'s row under ``sample: dataset``."""
        return self.drawn(seed, seq) if spec.replacement else self.shuffled(seed, seq)


def prepare_rows(
    dataset_id: str,
    entries: tuple[FileEntry, ...],
    spec: DatasetWorkload,
    count: Callable[[list[str]], list[int] | None],
    estimate: Callable[[str], int],
    answers_needed: bool,
) -> DatasetRows:
    """The rows of ``entries`` that pass ``spec.filters``. ``count`` counts a batch of
    texts with the workload's tokenizer (None: ``estimate`` each). ``answers_needed``:
    the workload has no mix, so a kept row without an answer length is an error naming
    it."""
    turns = [first_turn(entry.messages) for entry in entries]
    prompts = [prompt_text(messages) for messages, _ in turns]
    answered = [
        i for i, (_, answer) in enumerate(turns) if answer and entries[i].max_tokens is None
    ]
    answers = [turns[i][1] or "" for i in answered]
    exact = count(prompts + answers)
    counted_with = "estimate" if exact is None else "tokenizer"
    if exact is None:
        exact = [estimate(text) for text in prompts + answers]
    prompt_tokens = [max(n, 1) for n in exact[: len(prompts)]]
    answer_tokens = dict(zip(answered, (max(n, 1) for n in exact[len(prompts) :]), strict=True))
    kept: list[DatasetRow] = []
    dropped = 0
    for index, entry in enumerate(entries):
        output = entry.max_tokens if entry.max_tokens is not None else answer_tokens.get(index)
        if not _passes(prompt_tokens[index], output, spec):
            dropped += 1
            continue
        row = entry.row if entry.row is not None else index
        if output is None and answers_needed:
            raise WorkloadFileError(
                f"row {row} of dataset {dataset_id} has no answer length (no answer turn, no "
                "max_tokens): give workload.mix for such rows, or "
                "workload.dataset.filters.min_output_tokens to drop them"
            )
        kept.append(DatasetRow(row, turns[index][0], prompt_tokens[index], output))
    if not kept:
        raise WorkloadFileError(
            f"no row of dataset {dataset_id} passes workload.dataset.filters "
            f"({spec.filters.model_dump(exclude_none=True)}; {len(entries)} rows, lengths by "
            f"{counted_with})"
        )
    return DatasetRows(dataset_id, tuple(kept), counted_with, dropped)


def _passes(prompt: int, output: int | None, spec: DatasetWorkload) -> bool:
    f = spec.filters
    if f.min_prompt_tokens is not None and prompt < f.min_prompt_tokens:
        return False
    if f.max_prompt_tokens is not None and prompt > f.max_prompt_tokens:
        return False
    if not f.on_output:
        return True
    if output is None:
        return False
    low, high = f.min_output_tokens, f.max_output_tokens
    return (low is None or output >= low) and (high is None or output <= high)
