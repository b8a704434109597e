"""The simulator's ``GET /metrics``: its state in vLLM's Prometheus names, so server
telemetry (docs/telemetry.md) is tested against a real endpoint.

With the batching model the figures are the scheduler's own: sequences running and
waiting, and the KV cache's share held by running sequences' tokens (of the tokens the
deployment's memory fits, docs/roofline.md). With the fixed-latency model there is no
queue and no KV cache: requests in flight are all running, nothing waits, and no KV
figure is served. Token counters count prompt tokens once a request's first token is
out (its prefill is done) and every output token as it is sent, in both models. The
text is written by ``prometheus_client``, as a real server's is.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from workers.simulator.batching import BatchingLatency
from workers.simulator.latency import LatencyModel

CONTENT_TYPE = b"text/plain; version=0.0.4; charset=utf-8"


@dataclass(slots=True)
class ServedCounters:
    """What the endpoint served, whatever its latency model."""

    in_flight: int = 0
    prompt_tokens: int = 0
    generation_tokens: int = 0

    async def counted(
        self, prompt_tokens: int, emissions: AsyncIterator[int]
    ) -> AsyncIterator[int]:
        """``emissions`` of one request, counted as they pass."""
        self.in_flight += 1
        first = True
        try:
            async for count in emissions:
                if first:
                    self.prompt_tokens += prompt_tokens
                    first = False
                self.generation_tokens += count
                yield count
        finally:
            self.in_flight -= 1
            close = getattr(emissions, "aclose", None)
            if close is not None:
                await close()


class _Collector:
    def __init__(self, model: str, latency: LatencyModel, counters: ServedCounters) -> None:
        self.model = model
        self.latency = latency
        self.counters = counters

    def _gauge(self, name: str, text: str, value: float) -> GaugeMetricFamily:
        family = GaugeMetricFamily(name, text, labels=["model_name"])
        family.add_metric([self.model], value)
        return family

    def _counter(self, name: str, text: str, value: float) -> CounterMetricFamily:
        family = CounterMetricFamily(name, text, labels=["model_name"])
        family.add_metric([self.model], value)
        return family

    def collect(self) -> Iterator[Metric]:
        latency = self.latency
        if isinstance(latency, BatchingLatency):
            scheduler = latency.scheduler
            running, waiting = len(scheduler.running), len(scheduler.waiting)
            kv_share = scheduler.kv_usage()
        else:
            running, waiting, kv_share = self.counters.in_flight, 0, None
        yield self._gauge("vllm:num_requests_running", "Requests in the running batch.", running)
        yield self._gauge("vllm:num_requests_waiting", "Requests waiting for a slot.", waiting)
        if kv_share is not None:
            yield self._gauge("vllm:kv_cache_usage_perc", "KV-cache share in use (0-1).", kv_share)
        yield self._counter(
            "vllm:prompt_tokens", "Prompt tokens prefilled.", self.counters.prompt_tokens
        )
        yield self._counter(
            "vllm:generation_tokens", "Output tokens sent.", self.counters.generation_tokens
        )


def metrics_text(model: str, latency: LatencyModel, counters: ServedCounters) -> bytes:
    """The exposition of the endpoint's current state."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(model, latency, counters))
    return generate_latest(registry)
