"""Roofline model of LLM serving on tensor-parallel accelerators (docs/roofline.md).

What a deployment *could* do: weight and KV memory, how many sequences fit, decode step
time as the slower of reading memory and doing the math, prefill time, and cost per
million output tokens. With ``efficiency=1`` and no step overhead the figures are the
ceiling that measured runs are compared against; real stacks reach a fraction of it.

``StepCost`` prices one step of a continuous-batching server that decodes and prefills
together (the batching simulator's clock), and ``decode_ceiling`` is what reports
compare a measured stage against.

Simplifications, on purpose: attention FLOPs are left out (under 10 % of 2·P per token
at 8k context and the bandwidth term already counts the KV read), tensor-parallel
communication is folded into ``step_overhead_s``, and activations into the runtime
allowance. Units: bytes, seconds, tokens per second, decimal prefixes except GiB.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from scenarios.catalog.loader import Catalog
from scenarios.catalog.models import Hardware, KvDtype, Model, Quantization

GIB = 2**30
SECONDS_PER_HOUR = 3600.0
TOKENS_PER_MILLION = 1e6
DEFAULT_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)


@dataclass(frozen=True)
class Assumptions:
    """The knobs of the model that are not catalog data; the defaults give the ceiling."""

    memory_utilisation: float = 0.9
    """Share of device memory the server may use (vLLM's ``gpu_memory_utilization``)."""
    runtime_overhead_bytes_per_gpu: float = 2 * GIB
    """CUDA context, graphs, communication buffers and activations, per device."""
    efficiency: float = 1.0
    """Share of peak bandwidth and FLOP/s a decode step reaches."""
    step_overhead_s: float = 0.0
    """Fixed time added to every decode step (scheduling, kernel launches, all-reduce)."""
    mfu: float = 0.5
    """Model FLOP/s utilisation during prefill."""

    def __post_init__(self) -> None:
        for name in ("memory_utilisation", "efficiency", "mfu"):
            value = getattr(self, name)
            if not 0 < value <= 1:
                raise ValueError(f"{name} must be in (0, 1], got {value}")
        if self.runtime_overhead_bytes_per_gpu < 0 or self.step_overhead_s < 0:
            raise ValueError("overheads must not be negative")


@dataclass(frozen=True)
class Deployment:
    """A model in a weight format and KV dtype, tensor-parallel over ``gpus`` devices."""

    model: Model
    quant: Quantization
    kv_dtype: KvDtype
    hardware: Hardware
    gpus: int

    def __post_init__(self) -> None:
        if self.gpus < 1:
            raise ValueError(f"gpus must be at least 1, got {self.gpus}")


@dataclass(frozen=True)
class MemoryFit:
    """Where the memory of a deployment goes, and how many sequences fit at a context."""

    context_tokens: int
    total_memory_bytes: float
    usable_memory_bytes: float
    weight_bytes: float
    runtime_overhead_bytes: float
    kv_budget_bytes: float
    """What is left for the KV cache; negative when the weights alone do not fit."""
    kv_bytes_per_token: float
    """Across all devices, including heads replicated when gpus > kv_heads."""
    kv_bytes_per_sequence: float
    max_kv_tokens: int
    max_sequences: int
    """Sequences of ``context_tokens`` that fit at once; 0 when the deployment is OOM."""

    @property
    def fits(self) -> bool:
        """At least one full-context sequence fits beside the weights."""
        return self.max_sequences >= 1


@dataclass(frozen=True)
class DecodeStep:
    """One decode step of ``batch`` sequences, each holding ``kv_tokens`` of context."""

    batch: int
    kv_tokens: int
    memory_bound_s: float
    compute_bound_s: float
    step_s: float
    bound: Literal["memory", "compute"]
    per_stream_tok_s: float
    aggregate_tok_s: float


@dataclass(frozen=True)
class Prefill:
    """Processing one prompt on an otherwise idle deployment."""

    prompt_tokens: int
    prefill_s: float
    prefill_tok_s: float
    ttft_s: float
    """Prefill plus one decode step, with no queueing (docs/roofline.md)."""


@dataclass(frozen=True)
class BatchPoint:
    """Decode speed and cost at one batch size."""

    step: DecodeStep
    usd_per_million_output_tokens: float | None


def params(model: Model) -> float:
    """Parameter count."""
    return model.params_billions * 1e9


def weight_bytes(model: Model, quant: Quantization) -> float:
    """W = params × bits per weight / 8 (405B at FP16 ≈ 812 GB)."""
    return params(model) * quant.bits_per_weight / 8


def kv_bytes_per_token(model: Model, kv_dtype: KvDtype) -> float:
    """2 (K and V) × layers × kv_heads × head_dim × bytes per element."""
    return 2 * model.layers * model.kv_heads * model.head_dim * kv_dtype.bytes_per_element


def kv_replication(model: Model, gpus: int) -> int:
    """Copies of each KV head: tensor parallelism cannot split a head, so beyond
    ``kv_heads`` devices the heads are replicated."""
    return max(1, math.ceil(gpus / model.kv_heads))


def peak_flops(deployment: Deployment) -> float:
    """Dense FLOP/s of one device at the rate the weight format computes at."""
    hardware = deployment.hardware
    if deployment.quant.compute_dtype == "fp8" and hardware.fp8_tflops is not None:
        return hardware.fp8_tflops * 1e12
    return hardware.bf16_tflops * 1e12


def memory_fit(
    deployment: Deployment, context_tokens: int, assumptions: Assumptions | None = None
) -> MemoryFit:
    """Weights + KV of resident tokens + runtime overhead ≤ memory × GPUs × utilisation."""
    if context_tokens < 1:
        raise ValueError(f"context_tokens must be at least 1, got {context_tokens}")
    knobs = assumptions or Assumptions()
    dep = deployment
    total = dep.hardware.memory_gib * GIB * dep.gpus
    usable = total * knobs.memory_utilisation
    weights = weight_bytes(dep.model, dep.quant)
    overhead = knobs.runtime_overhead_bytes_per_gpu * dep.gpus
    budget = usable - weights - overhead
    per_token = kv_bytes_per_token(dep.model, dep.kv_dtype) * kv_replication(dep.model, dep.gpus)
    per_sequence = per_token * context_tokens
    return MemoryFit(
        context_tokens=context_tokens,
        total_memory_bytes=total,
        usable_memory_bytes=usable,
        weight_bytes=weights,
        runtime_overhead_bytes=overhead,
        kv_budget_bytes=budget,
        kv_bytes_per_token=per_token,
        kv_bytes_per_sequence=per_sequence,
        max_kv_tokens=max(0, math.floor(budget / per_token)),
        max_sequences=max(0, math.floor(budget / per_sequence)),
    )


def decode_step(
    deployment: Deployment, batch: int, kv_tokens: int, assumptions: Assumptions | None = None
) -> DecodeStep:
    """step = max((W + Σ KV read) / (g·BW), 2·P·b / (g·FLOPS)) + overhead.

    Each step reads every weight once and each sequence's whole KV cache, and does 2·P
    FLOPs per sequence; tensor parallelism adds the devices' bandwidth and FLOP/s up.
    """
    if batch < 1 or kv_tokens < 0:
        raise ValueError(f"need batch ≥ 1 and kv_tokens ≥ 0, got {batch}, {kv_tokens}")
    knobs = assumptions or Assumptions()
    dep = deployment
    per_token = kv_bytes_per_token(dep.model, dep.kv_dtype) * kv_replication(dep.model, dep.gpus)
    bytes_read = weight_bytes(dep.model, dep.quant) + batch * kv_tokens * per_token
    bandwidth = dep.gpus * dep.hardware.bandwidth_tb_s * 1e12 * knobs.efficiency
    flops = dep.gpus * peak_flops(dep) * knobs.efficiency
    memory_s = bytes_read / bandwidth
    compute_s = 2 * params(dep.model) * batch / flops
    step = max(memory_s, compute_s) + knobs.step_overhead_s
    return DecodeStep(
        batch=batch,
        kv_tokens=kv_tokens,
        memory_bound_s=memory_s,
        compute_bound_s=compute_s,
        step_s=step,
        bound="memory" if memory_s >= compute_s else "compute",
        per_stream_tok_s=1 / step,
        aggregate_tok_s=batch / step,
    )


def prefill(
    deployment: Deployment, prompt_tokens: int, assumptions: Assumptions | None = None
) -> Prefill:
    """Prefill ≈ 2·P·prompt / (g·FLOPS·MFU); TTFT ≈ prefill + one decode step.

    A short prompt still reads every weight once, so prefill is never faster than that.
    """
    if prompt_tokens < 1:
        raise ValueError(f"prompt_tokens must be at least 1, got {prompt_tokens}")
    knobs = assumptions or Assumptions()
    dep = deployment
    compute_s = 2 * params(dep.model) * prompt_tokens / (dep.gpus * peak_flops(dep) * knobs.mfu)
    weights_s = weight_bytes(dep.model, dep.quant) / (
        dep.gpus * dep.hardware.bandwidth_tb_s * 1e12 * knobs.efficiency
    )
    prefill_s = max(compute_s, weights_s)
    first_step = decode_step(dep, 1, prompt_tokens, knobs)
    return Prefill(
        prompt_tokens=prompt_tokens,
        prefill_s=prefill_s,
        prefill_tok_s=prompt_tokens / prefill_s,
        ttft_s=prefill_s + first_step.step_s,
    )


def usd_per_million_output_tokens(gpu_hour_usd: float, gpus: int, aggregate_tok_s: float) -> float:
    """(GPU $/hour × GPUs) / (aggregate output tok/s × 3600) × 1e6 (docs/roofline.md)."""
    if aggregate_tok_s <= 0:
        raise ValueError("aggregate_tok_s must be positive")
    return gpu_hour_usd * gpus / (aggregate_tok_s * SECONDS_PER_HOUR) * TOKENS_PER_MILLION


def sweep_batches(max_sequences: int, batches: list[int] | None = None) -> list[int]:
    """Batch sizes to tabulate: powers of two up to 256 (or ``batches``), none above
    ``max_sequences``, plus ``max_sequences`` itself when it lies inside the range."""
    candidates = sorted(set(batches or DEFAULT_BATCHES))
    chosen = [b for b in candidates if 1 <= b <= max_sequences]
    if chosen and max_sequences < candidates[-1] and max_sequences not in chosen:
        chosen.append(max_sequences)
    return chosen


def batch_table(
    deployment: Deployment,
    kv_tokens: int,
    batches: list[int],
    gpu_hour_usd: float | None,
    assumptions: Assumptions | None = None,
) -> list[BatchPoint]:
    """Decode speed and cost for each batch size, sequences holding ``kv_tokens`` each."""
    points = []
    for batch in batches:
        step = decode_step(deployment, batch, kv_tokens, assumptions)
        cost = (
            None
            if gpu_hour_usd is None
            else usd_per_million_output_tokens(gpu_hour_usd, deployment.gpus, step.aggregate_tok_s)
        )
        points.append(BatchPoint(step=step, usd_per_million_output_tokens=cost))
    return points


# ------------------------------------------------------------- continuous batching


@dataclass(frozen=True)
class StepCost:
    """Duration of one continuous-batching step, with the deployment's constants folded in.

    A step reads every weight once plus the KV cache of each decoding sequence, and does
    2·P FLOPs per decoded token (at ``efficiency``) and per prefilled prompt token (at
    ``mfu``); it lasts as long as the slower of the two, plus ``step_overhead_s``. With
    only decodes this is :func:`decode_step`; with only a prompt it is :func:`prefill`'s
    ``prefill_s`` plus the overhead. The batching simulator calls ``seconds`` once per
    step, so the per-call work is a few multiplications.
    """

    weight_read_s: float
    kv_read_s_per_token: float
    decode_s_per_token: float
    prefill_s_per_token: float
    overhead_s: float

    @classmethod
    def of(cls, deployment: Deployment, assumptions: Assumptions | None = None) -> StepCost:
        """The step cost of ``deployment`` under ``assumptions``."""
        knobs = assumptions or Assumptions()
        dep = deployment
        bandwidth = dep.gpus * dep.hardware.bandwidth_tb_s * 1e12 * knobs.efficiency
        replicas = kv_replication(dep.model, dep.gpus)
        per_token = kv_bytes_per_token(dep.model, dep.kv_dtype) * replicas
        flops_per_token = 2 * params(dep.model)
        device_flops = dep.gpus * peak_flops(dep)
        return cls(
            weight_read_s=weight_bytes(dep.model, dep.quant) / bandwidth,
            kv_read_s_per_token=per_token / bandwidth,
            decode_s_per_token=flops_per_token / (device_flops * knobs.efficiency),
            prefill_s_per_token=flops_per_token / (device_flops * knobs.mfu),
            overhead_s=knobs.step_overhead_s,
        )

    def seconds(self, decode_batch: float, decode_kv_tokens: float, prefill_tokens: float) -> float:
        """One step decoding ``decode_batch`` sequences that hold ``decode_kv_tokens`` of KV
        in all, while prefilling ``prefill_tokens`` prompt tokens."""
        memory_s = self.weight_read_s + decode_kv_tokens * self.kv_read_s_per_token
        compute_s = (
            decode_batch * self.decode_s_per_token + prefill_tokens * self.prefill_s_per_token
        )
        return max(memory_s, compute_s) + self.overhead_s


@dataclass(frozen=True)
class DecodeCeiling:
    """Decode speed a deployment could reach at an observed batch and context."""

    batch: float
    kv_tokens: float
    step_s: float
    bound: Literal["memory", "compute"]
    per_stream_tok_s: float
    aggregate_tok_s: float
    max_sequences: int
    """Sequences of ``kv_tokens`` that fit at once (0: the deployment is OOM)."""


def decode_ceiling(
    deployment: Deployment,
    batch: float,
    kv_tokens: float,
    assumptions: Assumptions | None = None,
) -> DecodeCeiling:
    """Roofline decode ceiling for a measured stage, to compare measured speed against.

    ``batch`` is the observed mean number of sequences decoding at once (a time average,
    so it may be fractional) and ``kv_tokens`` the mean context each holds (e.g. mean
    prompt + half the mean output). With the default ``assumptions`` (efficiency 1, no
    overhead) this is the ceiling: measured per-stream tok/s ÷ ``per_stream_tok_s`` is
    the efficiency of the stack; ``aggregate_tok_s`` gives the cost floor through
    :func:`usd_per_million_output_tokens`.
    """
    if batch < 1 or kv_tokens < 0:
        raise ValueError(f"need batch ≥ 1 and kv_tokens ≥ 0, got {batch}, {kv_tokens}")
    cost = StepCost.of(deployment, assumptions)
    memory_s = cost.weight_read_s + batch * kv_tokens * cost.kv_read_s_per_token
    compute_s = batch * cost.decode_s_per_token
    step = max(memory_s, compute_s) + cost.overhead_s
    fit = memory_fit(deployment, max(1, math.ceil(kv_tokens)), assumptions)
    return DecodeCeiling(
        batch=batch,
        kv_tokens=kv_tokens,
        step_s=step,
        bound="memory" if memory_s >= compute_s else "compute",
        per_stream_tok_s=1 / step,
        aggregate_tok_s=batch / step,
        max_sequences=fit.max_sequences,
    )


def resolve_deployment(
    catalog: Catalog,
    *,
    model: str,
    quant: str,
    hardware: str,
    gpus: int,
    kv_dtype: str = "fp16",
) -> Deployment:
    """Catalog ids to a :class:`Deployment`; UnknownIdError names an unknown id and lists
    the valid ones, ValueError rejects more GPUs than one tensor-parallel group spans."""
    device = catalog.get_hardware(hardware)
    if gpus > device.max_devices:
        raise ValueError(
            f"{device.id} spans at most {device.max_devices} device(s) in one "
            f"tensor-parallel group, not {gpus}"
        )
    return Deployment(
        model=catalog.get_model(model),
        quant=catalog.get_quantization(quant),
        kv_dtype=catalog.get_kv_dtype(kv_dtype),
        hardware=device,
        gpus=gpus,
    )
