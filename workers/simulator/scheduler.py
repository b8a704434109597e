"""Discrete-event model of one continuous-batching server, free of clocks and I/O.

The server holds up to ``capacity`` sequences (the KV cache at the configured context,
capped by ``max_batch``); later requests wait in a FIFO queue. It works in steps, and
each step's duration comes from the roofline (``scenarios.roofline.StepCost``):

- without chunked prefill (vLLM's classic scheduler) a step either prefills admitted
  prompts (up to ``context`` prompt tokens, at least one prompt), stalling every decode,
  or decodes one token for every running sequence;
- with chunked prefill every running sequence decodes one token and prompt chunks fill
  the rest of a ``chunk_tokens`` budget, so decodes never stall.

A sequence's first token comes from the first decode step after its prompt is fully
prefilled (TTFT ≈ queueing + prefill + one decode step, docs/roofline.md). Requests are
admitted only at step boundaries and only once their arrival time has passed, so the
same arrivals always give the same token times: ``replay`` runs the model on virtual
time, and the asynchronous driver (``batching``) paces the same steps in real time.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from scenarios.catalog import default_catalog
from scenarios.providers.simulate import SimulateSpec
from scenarios.roofline import Assumptions, Deployment, StepCost, memory_fit, resolve_deployment

if TYPE_CHECKING:
    import asyncio


@dataclass(slots=True, eq=False)
class Sequence:
    """One request inside the server: its prompt, its output budget and its progress."""

    prompt_tokens: int
    limit: int
    """Output tokens it will produce: max_tokens, cut so prompt + output fits the context."""
    arrival: float
    scheduled: float | None = None
    """Model time it left the waiting queue for the running batch (its queue time ends)."""
    prefilled: int = 0
    generated: int = 0
    finished: bool = False
    cancelled: bool = False
    dues: deque[float] = field(default_factory=deque)
    """Model times of tokens produced but not yet taken by the stream (the driver's)."""
    waiter: asyncio.Future[None] | None = None
    """The stream's pending wake-up, owned by the asynchronous driver."""

    @property
    def kv_tokens(self) -> int:
        """Tokens resident in its KV cache, all read by each decode step."""
        return self.prefilled + self.generated


@dataclass(slots=True)
class Step:
    """One scheduled step: who decodes a token, which prompt chunks are prefilled."""

    start: float
    end: float
    decoders: list[Sequence]
    prefill: list[tuple[Sequence, int]]


class BatchScheduler:
    """The server's state and its scheduling rule; time is whatever the caller passes."""

    def __init__(
        self,
        cost: StepCost,
        capacity: int,
        context: int,
        chunk_tokens: int | None = None,
        kv_tokens_capacity: int | None = None,
    ) -> None:
        if capacity < 1 or context < 2:
            raise ValueError(f"need capacity ≥ 1 and context ≥ 2, got {capacity}, {context}")
        if chunk_tokens is not None and chunk_tokens < capacity:
            raise ValueError(f"chunk_tokens ({chunk_tokens}) must be ≥ capacity ({capacity})")
        self.cost = cost
        self.capacity = capacity
        self.context = context
        self.chunk_tokens = chunk_tokens
        # Tokens the deployment's KV cache holds (docs/roofline.md); by default what the
        # running slots may hold at full context.
        self.kv_tokens_capacity = kv_tokens_capacity or capacity * context
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.steps = 0
        self.max_running = 0
        self.max_waiting = 0

    @classmethod
    def from_spec(cls, spec: SimulateSpec) -> BatchScheduler:
        """The scheduler of a validated ``simulate`` block whose ``model`` is set."""
        deployment, knobs = spec_deployment(spec)
        fit = memory_fit(deployment, spec.context, knobs)
        return cls(
            StepCost.of(deployment, knobs),
            capacity=min(spec.max_batch, fit.max_sequences),
            context=spec.context,
            chunk_tokens=spec.chunked_prefill_tokens,
            kv_tokens_capacity=fit.max_kv_tokens,
        )

    def submit(
        self, prompt_tokens: int, max_tokens: int, arrival: float, cached_tokens: int = 0
    ) -> Sequence:
        """Queue a request arriving at ``arrival`` (not before earlier submissions);
        ``cached_tokens`` of its prompt are in the prefix cache: already in its KV, not
        prefilled (at least its last prompt token is, as in vLLM, for its logits)."""
        # A request longer than the context is cut to it (vLLM would refuse it with 400):
        # the model cannot answer with an error, and a slot holds ``context`` tokens.
        prompt = max(1, min(prompt_tokens, self.context - 1))
        seq = Sequence(prompt, max(1, min(max_tokens, self.context - prompt)), arrival)
        seq.prefilled = max(0, min(cached_tokens, prompt - 1))
        self.waiting.append(seq)
        self.max_waiting = max(self.max_waiting, len(self.waiting))
        return seq

    def kv_usage(self) -> float:
        """Share of the KV cache held by the running sequences' tokens (0..1), as a
        serving stack's ``kv_cache_usage`` gauge reports it."""
        resident = sum(s.kv_tokens for s in self.running if not s.cancelled)
        return min(resident / self.kv_tokens_capacity, 1.0)

    def cancel(self, seq: Sequence) -> None:
        """The client went away: free its slot at the next step boundary."""
        seq.cancelled = True

    def next_step(self, now: float) -> Step | None:
        """The step starting at ``now``, or at the next arrival when the server is idle
        until then; None when nothing is running or waiting."""
        while True:
            step = self._plan(now)
            if step is not None:
                return step
            arrival = self._next_arrival()
            if arrival is None or arrival <= now:
                return None
            now = arrival

    def complete(self, step: Step) -> list[Sequence]:
        """Apply a finished step; the sequences that received a token."""
        self.steps += 1
        for seq, tokens in step.prefill:
            seq.prefilled += tokens
        granted = []
        for seq in step.decoders:
            if seq.cancelled:
                continue
            seq.generated += 1
            seq.finished = seq.generated >= seq.limit
            granted.append(seq)
        self.running = [s for s in self.running if not (s.finished or s.cancelled)]
        return granted

    def _next_arrival(self) -> float | None:
        while self.waiting and self.waiting[0].cancelled:
            self.waiting.popleft()
        return self.waiting[0].arrival if self.waiting else None

    def _plan(self, now: float) -> Step | None:
        running = [s for s in self.running if not s.cancelled]
        waiting = self.waiting
        while waiting and len(running) < self.capacity and waiting[0].arrival <= now:
            seq = waiting.popleft()
            if not seq.cancelled:
                seq.scheduled = now
                running.append(seq)
        self.running = running
        self.max_running = max(self.max_running, len(running))
        decoders = [s for s in running if s.prefilled == s.prompt_tokens]
        prompts = [s for s in running if s.prefilled < s.prompt_tokens]
        if self.chunk_tokens is None and prompts:
            # Classic scheduling: prefill first, whole prompts, decodes wait.
            chunks = _fill(prompts, self.context, whole=True)
            decoders = []
        else:
            budget = (self.chunk_tokens or 0) - len(decoders)
            chunks = _fill(prompts, budget, whole=False) if prompts else []
        if not decoders and not chunks:
            return None
        kv = sum(s.prefilled + s.generated for s in decoders)
        prefill_tokens = sum(tokens for _, tokens in chunks)
        duration = self.cost.seconds(len(decoders), kv, prefill_tokens)
        return Step(now, now + duration, decoders, chunks)


def _fill(prompts: list[Sequence], budget: int, *, whole: bool) -> list[tuple[Sequence, int]]:
    """Prompt work for one step, oldest first, within ``budget`` tokens. Whole prompts
    always include the first one, however long: a prompt is never split without chunking."""
    chunks: list[tuple[Sequence, int]] = []
    for seq in prompts:
        left = seq.prompt_tokens - seq.prefilled
        if whole:
            if chunks and left > budget:
                break
            chunks.append((seq, left))
        elif budget > 0:
            chunks.append((seq, min(left, budget)))
        budget -= left
        if budget <= 0:
            break
    return chunks


def spec_deployment(spec: SimulateSpec) -> tuple[Deployment, Assumptions]:
    """The roofline deployment and assumptions a ``simulate`` block describes."""
    if spec.model is None:
        raise ValueError("the simulate block has no model: it uses the fixed latency model")
    deployment = resolve_deployment(
        default_catalog(),
        model=spec.model,
        quant=spec.quant,
        hardware=spec.hardware,
        gpus=spec.gpus,
        kv_dtype=spec.kv_dtype,
    )
    knobs = Assumptions(
        efficiency=spec.efficiency, mfu=spec.mfu, step_overhead_s=spec.step_overhead_ms / 1000
    )
    return deployment, knobs


def replay(
    scheduler: BatchScheduler, requests: Iterable[tuple[float, int, int]]
) -> list[list[float]]:
    """Run the model on virtual time: for each ``(arrival, prompt_tokens, max_tokens)``,
    in the order given, the times its output tokens are produced."""
    ordered = sorted(enumerate(requests), key=lambda item: item[1][0])
    times: list[list[float]] = [[] for _ in ordered]
    index_of: dict[Sequence, int] = {}
    for index, (arrival, prompt, max_tokens) in ordered:
        index_of[scheduler.submit(prompt, max_tokens, arrival)] = index
    now = ordered[0][1][0] if ordered else 0.0
    while (step := scheduler.next_step(now)) is not None:
        for seq in scheduler.complete(step):
            times[index_of[seq]].append(step.end)
        now = step.end
    return times
