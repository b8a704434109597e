"""The simulator's ``GET /metrics``: its state in vLLM's Prometheus names, so server
telemetry (docs/telemetry.md) is tested against a real endpoint.

With the batching model the figures are the scheduler's own: sequences running and
waiting, and the KV cache's share held by running sequences' tokens (of the tokens the
deployment's memory fits, docs/roofline.md). With the fixed-latency model there is no
queue and no KV cache: requests in flight are all running, nothing waits, and no KV
figure is served. Token counters count prompt tokens once a request's first token is
out (its prefill is done) and every output token as it is sent, in both models. The
text is written by ``prometheus_client``, as a real server's is.

Three figures are served when the ``simulate`` block asks for them: with
``prefix_cache``, vLLM's prefix-cache counters (prompt tokens looked up and found, as
the endpoint's usage reports them); with ``spec_decode_acceptance``, vLLM's
speculative-decoding counters (``spec_decode.py``); with ``gpu_power``, a DCGM
exporter's power gauge per GPU, modelled from the share of the batch in use.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from scenarios.providers.simulate import SimulateSpec
from workers.simulator.batching import BatchingLatency
from workers.simulator.latency import LatencyModel
from workers.simulator.spec_decode import SpecDecodeCounters

CONTENT_TYPE = b"text/plain; version=0.0.4; charset=utf-8"


@dataclass(frozen=True, slots=True)
class GpuPower:
    """The power model of ``simulate.gpu_power``: each of ``gpus`` devices draws
    ``idle_w`` plus ``max_w - idle_w`` times the busy share of the server."""

    gpus: int
    idle_w: float
    max_w: float

    def watts(self, busy_share: float) -> float:
        """One GPU's draw at ``busy_share`` (clamped to 0..1)."""
        return self.idle_w + (self.max_w - self.idle_w) * min(max(busy_share, 0.0), 1.0)


@dataclass(slots=True)
class ServedCounters:
    """What the endpoint served, whatever its latency model, and which of the optional
    figures it serves."""

    in_flight: int = 0
    prompt_tokens: int = 0
    generation_tokens: int = 0
    prefix_cache: bool = False
    prefix_queried_tokens: int = 0
    prefix_hit_tokens: int = 0
    spec_decode: SpecDecodeCounters | None = None
    power: GpuPower | None = None

    @classmethod
    def for_spec(cls, spec: SimulateSpec) -> ServedCounters:
        """The counters of an endpoint configured by ``spec``."""
        spec_decode = None
        if spec.spec_decode_acceptance is not None:
            spec_decode = SpecDecodeCounters(
                spec.spec_decode_acceptance, spec.spec_decode_tokens, spec.seed
            )
        power = None
        if spec.gpu_power:
            gpus = spec.gpus if spec.model is not None else 1
            power = GpuPower(gpus, spec.gpu_idle_watts, spec.gpu_max_watts)
        return cls(prefix_cache=spec.prefix_cache, spec_decode=spec_decode, power=power)

    def looked_up(self, queried_tokens: int, hit_tokens: int) -> None:
        """Count one prefix-cache lookup: the prompt tokens looked up, those found."""
        self.prefix_queried_tokens += queried_tokens
        self.prefix_hit_tokens += hit_tokens

    async def counted(
        self, prompt_tokens: int, emissions: AsyncIterator[int]
    ) -> AsyncIterator[int]:
        """``emissions`` of one request, counted as they pass."""
        self.in_flight += 1
        first = True
        try:
            async for count in emissions:
                if self.spec_decode is not None:
                    # The first token comes from the prefill, the rest from drafts.
                    self.spec_decode.decoded(count - 1 if first else count)
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
        counters = self.counters
        if isinstance(latency, BatchingLatency):
            scheduler = latency.scheduler
            running, waiting = len(scheduler.running), len(scheduler.waiting)
            kv_share = scheduler.kv_usage()
            busy = running / scheduler.capacity
        else:
            running, waiting, kv_share = counters.in_flight, 0, None
            busy = 1.0 if running else 0.0
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
        if counters.prefix_cache:
            yield self._counter(
                "vllm:prefix_cache_queries",
                "Prefix cache queries, in prompt tokens looked up.",
                counters.prefix_queried_tokens,
            )
            yield self._counter(
                "vllm:prefix_cache_hits",
                "Prefix cache hits, in prompt tokens found cached.",
                counters.prefix_hit_tokens,
            )
        if counters.spec_decode is not None:
            spec = counters.spec_decode
            yield self._counter("vllm:spec_decode_num_drafts", "Drafts.", spec.drafts)
            yield self._counter(
                "vllm:spec_decode_num_draft_tokens", "Draft tokens.", spec.draft_tokens
            )
            yield self._counter(
                "vllm:spec_decode_num_accepted_tokens", "Accepted tokens.", spec.accepted_tokens
            )
        if counters.power is not None:
            yield self._power(counters.power, busy)

    def _power(self, power: GpuPower, busy: float) -> GaugeMetricFamily:
        """One DCGM power series per GPU, labelled as the exporter labels them."""
        family = GaugeMetricFamily(
            "DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", labels=["gpu", "UUID", "modelName"]
        )
        for gpu in range(power.gpus):
            family.add_metric([str(gpu), f"GPU-sim-{gpu}", "simulated"], power.watts(busy))
        return family


def metrics_text(model: str, latency: LatencyModel, counters: ServedCounters) -> bytes:
    """The exposition of the endpoint's current state."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(model, latency, counters))
    return generate_latest(registry)
