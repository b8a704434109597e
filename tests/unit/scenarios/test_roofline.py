"""Roofline arithmetic against the hand-computed figures of docs/roofline.md."""

from __future__ import annotations

from itertools import pairwise

import pytest

from scenarios.catalog import Catalog, UnknownIdError, default_catalog
from scenarios.roofline import (
    Assumptions,
    Deployment,
    StepCost,
    batch_table,
    decode_ceiling,
    decode_step,
    kv_bytes_per_token,
    kv_replication,
    memory_fit,
    prefill,
    resolve_deployment,
    sweep_batches,
    usd_per_million_output_tokens,
    weight_bytes,
)

CEILING = Assumptions(efficiency=1.0, step_overhead_s=0.0)


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return default_catalog()


def deployment(
    catalog: Catalog, model: str, quant: str, hardware: str, gpus: int, kv: str = "fp16"
) -> Deployment:
    return Deployment(
        model=catalog.get_model(model),
        quant=catalog.get_quantization(quant),
        kv_dtype=catalog.get_kv_dtype(kv),
        hardware=catalog.get_hardware(hardware),
        gpus=gpus,
    )


@pytest.mark.parametrize(
    ("model", "expected"),
    [("llama-3.1-8b", 131_072), ("llama-3.1-70b", 327_680), ("llama-3.1-405b", 516_096)],
)
def test_kv_bytes_per_token_fp16(catalog: Catalog, model: str, expected: int) -> None:
    assert kv_bytes_per_token(catalog.get_model(model), catalog.get_kv_dtype("fp16")) == expected


def test_fp8_kv_halves_the_cache(catalog: Catalog) -> None:
    model = catalog.get_model("llama-3.1-405b")
    assert kv_bytes_per_token(model, catalog.get_kv_dtype("fp8")) == 516_096 / 2


def test_405b_kv_for_2k_tokens_is_about_a_gigabyte(catalog: Catalog) -> None:
    model = catalog.get_model("llama-3.1-405b")
    assert kv_bytes_per_token(model, catalog.get_kv_dtype("fp16")) * 2048 == pytest.approx(
        1.06e9, rel=0.01
    )


def test_weight_bytes(catalog: Catalog) -> None:
    model = catalog.get_model("llama-3.1-405b")
    assert weight_bytes(model, catalog.get_quantization("fp16")) == pytest.approx(812e9, rel=0.001)
    assert weight_bytes(model, catalog.get_quantization("fp8")) == pytest.approx(406e9, rel=0.001)
    q4 = weight_bytes(model, catalog.get_quantization("q4_k_m"))
    assert q4 == pytest.approx(405.9e9 * 4.85 / 8)


def test_kv_heads_replicate_beyond_kv_head_count(catalog: Catalog) -> None:
    model = catalog.get_model("llama-3.1-8b")
    assert [kv_replication(model, g) for g in (1, 8, 16)] == [1, 1, 2]


@pytest.mark.parametrize(
    ("quant", "hardware", "expected_tok_s"),
    [("fp16", "h100", 33), ("fp16", "h200", 47), ("fp8", "h100", 66)],
)
def test_405b_single_stream_ceiling(
    catalog: Catalog, quant: str, hardware: str, expected_tok_s: float
) -> None:
    dep = deployment(catalog, "llama-3.1-405b", quant, hardware, 8)
    step = decode_step(dep, batch=1, kv_tokens=0, assumptions=CEILING)
    assert step.bound == "memory"
    assert step.per_stream_tok_s == pytest.approx(expected_tok_s, rel=0.025)
    # A 2k-token context barely moves the single-stream ceiling: weights dominate.
    with_context = decode_step(dep, batch=1, kv_tokens=2048, assumptions=CEILING)
    assert with_context.per_stream_tok_s == pytest.approx(expected_tok_s, rel=0.03)


def test_efficiency_and_overhead_slow_the_step(catalog: Catalog) -> None:
    dep = deployment(catalog, "llama-3.1-405b", "fp8", "h100", 8)
    ceiling = decode_step(dep, 1, 0, CEILING)
    real = decode_step(dep, 1, 0, Assumptions(efficiency=0.5, step_overhead_s=0.001))
    assert real.step_s == pytest.approx(ceiling.step_s * 2 + 0.001)


@pytest.mark.parametrize(
    ("quant", "hardware", "fits"),
    [("fp16", "h100", False), ("fp16", "h200", True), ("fp8", "h100", True)],
)
def test_405b_memory_fit_on_eight_gpus(
    catalog: Catalog, quant: str, hardware: str, fits: bool
) -> None:
    fit = memory_fit(deployment(catalog, "llama-3.1-405b", quant, hardware, 8), 8192)
    assert fit.fits is fits
    assert (fit.max_sequences > 0) is fits


def test_max_sequences_follows_from_the_kv_budget(catalog: Catalog) -> None:
    fit = memory_fit(deployment(catalog, "llama-3.1-405b", "fp8", "h100", 8), 8192)
    assert fit.kv_budget_bytes == pytest.approx(
        fit.usable_memory_bytes - fit.weight_bytes - fit.runtime_overhead_bytes
    )
    assert fit.max_sequences == int(fit.kv_budget_bytes // (516_096 * 8192))
    # FP8 KV doubles what fits; H200 holds more than H100 for the same deployment.
    fp8_kv = memory_fit(deployment(catalog, "llama-3.1-405b", "fp8", "h100", 8, "fp8"), 8192)
    assert fp8_kv.max_sequences in (2 * fit.max_sequences, 2 * fit.max_sequences + 1)
    h200 = memory_fit(deployment(catalog, "llama-3.1-405b", "fp8", "h200", 8), 8192)
    assert h200.max_sequences > fit.max_sequences


def test_oom_reports_zero_sequences_and_negative_budget(catalog: Catalog) -> None:
    fit = memory_fit(deployment(catalog, "llama-3.1-405b", "fp16", "h100", 1), 8192)
    assert fit.kv_budget_bytes < 0
    assert (fit.max_sequences, fit.max_kv_tokens, fit.fits) == (0, 0, False)


def test_batching_raises_aggregate_and_lowers_per_stream(catalog: Catalog) -> None:
    # 4-bit weights on an A100 reach the compute roof at a modest batch (~45 here);
    # long contexts on FP8 H100s stay memory-bound far longer because of KV reads.
    dep = deployment(catalog, "llama-3.1-70b", "int4-awq", "a100-80gb", 1)
    steps = [decode_step(dep, b, 256, CEILING) for b in (1, 2, 4, 8, 16, 32, 64, 128, 256)]
    aggregates = [s.aggregate_tok_s for s in steps]
    per_stream = [s.per_stream_tok_s for s in steps]
    assert aggregates == sorted(aggregates)
    assert aggregates[-1] > 10 * aggregates[0]
    assert per_stream == sorted(per_stream, reverse=True)
    assert steps[0].bound == "memory"
    compute = [s for s in steps if s.bound == "compute"]
    assert compute, "large batches must reach the compute roof"
    # Once compute-bound, each added sequence costs a full share of the FLOPs.
    assert all(a.per_stream_tok_s > b.per_stream_tok_s for a, b in pairwise(compute))


def test_compute_roof_uses_fp8_units_only_when_present(catalog: Catalog) -> None:
    h100 = decode_step(deployment(catalog, "llama-3.1-8b", "fp8", "h100", 1), 256, 0, CEILING)
    assert h100.compute_bound_s == pytest.approx(2 * 8.03e9 * 256 / 1979e12)
    a100 = decode_step(deployment(catalog, "llama-3.1-8b", "fp8", "a100-80gb", 1), 256, 0, CEILING)
    assert a100.compute_bound_s == pytest.approx(2 * 8.03e9 * 256 / 312e12)


def test_cost_per_million_falls_with_batch(catalog: Catalog) -> None:
    dep = deployment(catalog, "llama-3.1-405b", "fp8", "h100", 8)
    points = batch_table(dep, 2048, [1, 2, 4, 8, 16, 32], gpu_hour_usd=3.0, assumptions=CEILING)
    costs = [p.usd_per_million_output_tokens for p in points]
    assert all(c is not None for c in costs)
    assert costs == sorted(costs, reverse=True)  # type: ignore[type-var]
    first = points[0]
    assert costs[0] == pytest.approx(3.0 * 8 / (first.step.aggregate_tok_s * 3600) * 1e6)
    assert batch_table(dep, 2048, [1], gpu_hour_usd=None)[0].usd_per_million_output_tokens is None


def test_usd_per_million_output_tokens_formula() -> None:
    # 8 GPUs at $3/h = $24/h; 1000 tok/s = 3.6M tok/h -> $6.67 per 1M.
    assert usd_per_million_output_tokens(3.0, 8, 1000.0) == pytest.approx(24 / 3.6)


def test_prefill_is_compute_bound_with_mfu(catalog: Catalog) -> None:
    dep = deployment(catalog, "llama-3.1-405b", "fp8", "h100", 8)
    result = prefill(dep, 8192, Assumptions(mfu=0.5))
    assert result.prefill_s == pytest.approx(2 * 405.9e9 * 8192 / (8 * 1979e12 * 0.5))
    assert result.prefill_tok_s == pytest.approx(8192 / result.prefill_s)
    one_step = decode_step(dep, 1, 8192).step_s
    assert result.ttft_s == pytest.approx(result.prefill_s + one_step)
    # A one-token prompt still has to read every weight once.
    assert prefill(dep, 1).prefill_s == pytest.approx(weight_bytes(dep.model, dep.quant) / 26.8e12)


def test_sweep_batches_caps_at_max_sequences() -> None:
    assert sweep_batches(1000) == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    assert sweep_batches(46) == [1, 2, 4, 8, 16, 32, 46]
    assert sweep_batches(64) == [1, 2, 4, 8, 16, 32, 64]
    assert sweep_batches(0) == []
    assert sweep_batches(10, [3, 1, 3, 50]) == [1, 3, 10]


def test_invalid_inputs_raise(catalog: Catalog) -> None:
    with pytest.raises(ValueError, match="efficiency"):
        Assumptions(efficiency=0)
    with pytest.raises(ValueError, match="gpus"):
        deployment(catalog, "llama-3.1-8b", "fp16", "h100", 0)
    dep = deployment(catalog, "llama-3.1-8b", "fp16", "h100", 1)
    with pytest.raises(ValueError, match="batch"):
        decode_step(dep, 0, 0)
    with pytest.raises(ValueError, match="context"):
        memory_fit(dep, 0)


# ------------------------------------------------------------- continuous batching

KNOBS = Assumptions(efficiency=0.6, mfu=0.4, step_overhead_s=0.003)


@pytest.mark.parametrize(("batch", "kv"), [(1, 0), (1, 8192), (32, 2048), (256, 100)])
def test_step_cost_of_pure_decode_is_the_decode_step(catalog: Catalog, batch: int, kv: int) -> None:
    dep = deployment(catalog, "llama-3.1-405b", "fp8", "h100", 8)
    cost = StepCost.of(dep, KNOBS)
    assert cost.seconds(batch, batch * kv, 0) == pytest.approx(
        decode_step(dep, batch, kv, KNOBS).step_s, rel=1e-12
    )


@pytest.mark.parametrize("prompt", [1, 100, 8000])
def test_step_cost_of_pure_prefill_is_prefill_plus_overhead(catalog: Catalog, prompt: int) -> None:
    dep = deployment(catalog, "llama-3.1-70b", "fp16", "h200", 4)
    cost = StepCost.of(dep, KNOBS)
    assert cost.seconds(0, 0, prompt) == pytest.approx(
        prefill(dep, prompt, KNOBS).prefill_s + 0.003, rel=1e-12
    )


def test_mixed_step_shares_one_weight_read(catalog: Catalog) -> None:
    dep = deployment(catalog, "llama-3.1-405b", "fp8", "h100", 8)
    cost = StepCost.of(dep, CEILING)
    decode_only, prefill_only = cost.seconds(8, 8 * 1000, 0), cost.seconds(0, 0, 512)
    assert max(decode_only, prefill_only) < cost.seconds(8, 8 * 1000, 512)
    assert cost.seconds(8, 8 * 1000, 512) < decode_only + prefill_only


def test_decode_ceiling_matches_the_figures_in_docs_roofline(catalog: Catalog) -> None:
    h100 = resolve_deployment(
        catalog, model="llama-3.1-405b", quant="fp16", hardware="h100", gpus=8
    )
    h200 = resolve_deployment(
        catalog, model="llama-3.1-405b", quant="fp16", hardware="h200", gpus=8
    )
    assert decode_ceiling(h100, 1, 0).per_stream_tok_s == pytest.approx(33.0, abs=0.05)
    single = decode_ceiling(h200, 1, 0)
    assert single.per_stream_tok_s == pytest.approx(47.3, abs=0.05)
    assert single.bound == "memory"
    assert decode_ceiling(h200, 1, 0).max_sequences > 0  # FP16 405B fits 8×H200
    assert decode_ceiling(h100, 1, 2048).max_sequences == 0  # ... but not 8×H100


def test_decode_ceiling_takes_an_observed_fractional_batch(catalog: Catalog) -> None:
    dep = resolve_deployment(catalog, model="llama-3.1-8b", quant="fp8", hardware="h100", gpus=1)
    low, mid, high = (decode_ceiling(dep, b, 1500) for b in (7, 7.5, 8))
    assert low.aggregate_tok_s < mid.aggregate_tok_s < high.aggregate_tok_s
    assert mid.aggregate_tok_s == pytest.approx(7.5 * mid.per_stream_tok_s)
    exact = decode_step(dep, 8, 1500)
    assert high.step_s == pytest.approx(exact.step_s, rel=1e-12)
    with pytest.raises(ValueError, match="batch"):
        decode_ceiling(dep, 0.5, 100)


def test_resolve_deployment_names_what_is_wrong(catalog: Catalog) -> None:
    with pytest.raises(UnknownIdError, match="unknown hardware id 'b300'"):
        resolve_deployment(catalog, model="llama-3.1-8b", quant="fp8", hardware="b300", gpus=1)
    with pytest.raises(ValueError, match="at most 1"):
        resolve_deployment(catalog, model="llama-3.1-8b", quant="fp8", hardware="m3-ultra", gpus=2)
