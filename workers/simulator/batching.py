"""The continuous-batching latency model: the scheduler of ``scheduler`` paced in real time.

One engine task per simulated endpoint (per process) runs the server's steps against
absolute ``perf_counter`` deadlines: a step planned at model time ``t`` ends at
``t + duration``, whenever the engine actually woke, so the engine's own lateness never
accumulates into the model's clock. At each deadline every sequence that decoded gets
its token and its stream is woken; the stream yields it and the server writes it.

Timing fidelity is measured, not assumed: ``stats()`` reports how late the engine woke
after each step's deadline and how late each event was handed to the server after its
token was due (served at ``GET /v1/simulator/stats``, see docs/roofline.md).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

from scenarios.providers.simulate import SimulateSpec
from workers.simulator.latency import FixedLatency, LatencyModel, sleep_until
from workers.simulator.scheduler import BatchScheduler, Sequence, Step
from workers.simulator.spans import current_timing

_US = 1e6


class Lateness:
    """Distribution of delays behind a deadline, in whole microseconds (cheap to record:
    one counter increment; a few thousand distinct values even over long runs)."""

    def __init__(self) -> None:
        self.counts: Counter[int] = Counter()
        self.total = 0

    def record(self, seconds: float) -> None:
        """Add one delay (negative values, which sleep_until rules out, count as 0)."""
        self.counts[max(0, int(seconds * _US))] += 1
        self.total += 1

    def summary(self) -> dict[str, float | int]:
        """Count, mean, p50/p90/p99/p99.9 and max, in milliseconds."""
        if not self.total:
            return {"count": 0}
        ordered = sorted(self.counts.items())
        out: dict[str, float | int] = {
            "count": self.total,
            "mean_ms": sum(us * n for us, n in ordered) / self.total / 1000,
        }
        targets = {"p50_ms": 0.5, "p90_ms": 0.9, "p99_ms": 0.99, "p999_ms": 0.999}
        seen = 0
        pending = sorted(targets.items(), key=lambda item: item[1])
        for us, n in ordered:
            seen += n
            while pending and seen >= pending[0][1] * self.total:
                out[pending.pop(0)[0]] = us / 1000
        out["max_ms"] = ordered[-1][0] / 1000
        return out


class BatchingLatency:
    """A ``LatencyModel`` whose requests share one continuous-batching server."""

    def __init__(self, scheduler: BatchScheduler, tokens_per_chunk: int = 1) -> None:
        self.scheduler = scheduler
        self.tokens_per_chunk = tokens_per_chunk
        self.wake_lateness = Lateness()
        """Engine wake-up after each step's deadline."""
        self.emit_lateness = Lateness()
        """Each event handed to the server after its last token was due."""
        self._arrived = asyncio.Event()
        self._engine: asyncio.Task[None] | None = None
        self._failure: BaseException | None = None

    @classmethod
    def from_spec(cls, spec: SimulateSpec) -> BatchingLatency:
        """The batching model of a validated ``simulate`` block whose ``model`` is set."""
        return cls(BatchScheduler.from_spec(spec), spec.tokens_per_chunk)

    async def emissions(
        self, prompt_tokens: int, max_tokens: int, cached_tokens: int = 0
    ) -> AsyncIterator[int]:
        """Queue the request on the shared server and yield its tokens as steps end
        (``cached_tokens`` of its prompt are not prefilled)."""
        if self._failure is not None:
            raise RuntimeError("the batching engine failed") from self._failure
        loop = asyncio.get_running_loop()
        if self._engine is None:
            self._engine = loop.create_task(self._run())
        seq = self.scheduler.submit(prompt_tokens, max_tokens, time.perf_counter(), cached_tokens)
        self._arrived.set()
        timing = current_timing()  # the span being timed, if the endpoint exports spans
        if timing is not None:
            timing.queued = seq.arrival
        yielded = 0
        try:
            while yielded < seq.limit:
                count = min(self.tokens_per_chunk, seq.limit - yielded)
                while len(seq.dues) < count:
                    seq.waiter = loop.create_future()
                    await seq.waiter
                if timing is not None and seq.scheduled is not None:
                    timing.scheduled = seq.scheduled  # admitted by the step that made it
                for _ in range(count - 1):
                    seq.dues.popleft()
                self.emit_lateness.record(time.perf_counter() - seq.dues.popleft())
                yielded += count
                yield count
        finally:
            # Closed early (client gone, stream cut): free the slot and the KV.
            if not seq.finished:
                self.scheduler.cancel(seq)

    async def _run(self) -> None:
        """The engine: plan a step, sleep until it ends, hand out its tokens, repeat."""
        scheduler = self.scheduler
        # Model time starts at the first arrival (next_step skips ahead to it), exactly as
        # in ``replay``: requests submitted before this task first ran are not lumped in.
        now = 0.0
        try:
            while True:
                step = scheduler.next_step(now)
                if step is None:
                    self._arrived.clear()
                    await self._arrived.wait()
                    continue
                await sleep_until(step.end)
                self.wake_lateness.record(time.perf_counter() - step.end)
                self._deliver(step)
                now = step.end
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # wake every stream rather than leave it hanging
            self._failure = exc
            for seq in [*scheduler.running, *scheduler.waiting]:
                if seq.waiter is not None and not seq.waiter.done():
                    seq.waiter.set_exception(RuntimeError("the batching engine failed"))
            raise

    def _deliver(self, step: Step) -> None:
        for seq in self.scheduler.complete(step):
            seq.dues.append(step.end)
            _wake(seq)

    def stats(self) -> dict[str, Any]:
        """What the engine did and how faithfully it kept time."""
        scheduler = self.scheduler
        return {
            "latency_model": "batching",
            "capacity": scheduler.capacity,
            "context": scheduler.context,
            "chunk_tokens": scheduler.chunk_tokens,
            "steps": scheduler.steps,
            "running": len(scheduler.running),
            "waiting": len(scheduler.waiting),
            "max_running": scheduler.max_running,
            "max_waiting": scheduler.max_waiting,
            "wake_lateness": self.wake_lateness.summary(),
            "emit_lateness": self.emit_lateness.summary(),
        }


def _wake(seq: Sequence) -> None:
    waiter = seq.waiter
    if waiter is not None:
        seq.waiter = None
        if not waiter.done():  # done when its stream was cancelled meanwhile
            waiter.set_result(None)


def latency_for(spec: SimulateSpec) -> LatencyModel:
    """The latency model a ``simulate`` block asks for: batching when ``model`` is set."""
    if spec.model is not None:
        return BatchingLatency.from_spec(spec)
    return FixedLatency(
        spec.ttft_ms / 1000,
        spec.itl_ms / 1000,
        spec.tokens_per_chunk,
        spec.prefill_ms_per_token / 1000,
    )
