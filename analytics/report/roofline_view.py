"""Self-hosted providers against their roofline: ceiling at the observed batch, measured
efficiency (model in scenarios/roofline.py, docs/roofline.md)."""

from __future__ import annotations

from typing import Any

from scenarios.catalog import UnknownIdError, default_catalog
from scenarios.roofline import decode_ceiling, memory_fit, resolve_deployment


def with_roofline(
    stages: list[dict[str, Any]], providers: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Stage rows with roofline columns for providers whose ``deployment`` names a model,
    hardware, GPU count and quantization; None elsewhere.

    The observed batch is the stage's achieved concurrency (Little's law over its steady
    window), capped by how many sequences fit in memory; resident KV per sequence is the
    mean prompt plus half the mean answer. The ceiling is the roofline at efficiency 1,
    so ``efficiency_pct`` is measured per-stream decode speed as a share of it."""
    catalog = default_catalog()
    deployments: dict[str, Any] = {}
    for provider in providers:
        if not (provider.get("deployment_model") and provider.get("hardware")):
            continue
        try:
            deployments[provider["provider"]] = resolve_deployment(
                catalog,
                model=provider["deployment_model"],
                quant=provider.get("quantization") or "fp16",
                hardware=provider["hardware"],
                gpus=int(provider.get("gpus") or 1),
            )
        except (UnknownIdError, ValueError):
            continue  # an id outside the catalog: no ceiling rather than a wrong one
    rows = []
    for row in stages:
        deployment = deployments.get(row["provider"])
        extra: dict[str, Any] = {
            "roofline_batch": None,
            "roofline_per_stream_tok_s": None,
            "roofline_aggregate_tok_s": None,
            "roofline_bound": None,
            "efficiency_pct": None,
            "aggregate_efficiency_pct": None,
        }
        ok = row.get("ok") or 0
        if deployment is not None and ok:
            prompt = (row.get("input_tokens") or 0) / ok
            answer = (row.get("output_tokens") or 0) / ok
            kv_tokens = max(1.0, prompt + answer / 2)
            fit = memory_fit(deployment, max(1, round(kv_tokens)))
            observed = row.get("achieved_concurrency") or row.get("concurrency") or 1
            batch = max(1.0, min(float(observed), float(max(fit.max_sequences, 1))))
            ceiling = decode_ceiling(deployment, batch, kv_tokens)
            measured = row.get("decode_tok_s_p50")
            aggregate = row.get("output_tok_s")
            extra.update(
                roofline_batch=round(batch, 2),
                roofline_per_stream_tok_s=ceiling.per_stream_tok_s,
                roofline_aggregate_tok_s=ceiling.aggregate_tok_s,
                roofline_bound=ceiling.bound,
                efficiency_pct=(100 * measured / ceiling.per_stream_tok_s) if measured else None,
                aggregate_efficiency_pct=(
                    100 * aggregate / ceiling.aggregate_tok_s if aggregate else None
                ),
            )
        rows.append({**row, **extra})
    return rows
