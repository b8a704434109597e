"""GuideLLM's printed distributions of one benchmark (``benchmarks[].metrics``), for
``guidellm`` (docs/import.md, "GuideLLM"): the same in both layouts it reads."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from analytics.imports.jsonfile import need_dict, opt_number
from analytics.imports.model import Figure, SummaryFigure

__all__ = ["figures"]

# (tokenbench figure, GuideLLM metric, unit, factor to that unit) of the summary.
_DISTRIBUTIONS: Final[tuple[tuple[Figure, str, str, float], ...]] = (
    ("ttft", "time_to_first_token_ms", "ms", 1.0),
    ("tpot", "inter_token_latency_ms", "ms", 1.0),
    ("e2e", "request_latency", "ms", 1000.0),
    ("prompt_tokens", "prompt_token_count", "tokens", 1.0),
    ("output_tokens", "output_token_count", "tokens", 1.0),
)
_RATES: Final[tuple[tuple[Figure, str, str], ...]] = (
    ("output_tokens_per_s", "output_tokens_per_second", "tokens/s"),
    ("requests_per_s", "requests_per_second", "requests/s"),
)
_STATS: Final = (
    ("median", "p50"),
    ("mean", "mean"),
    ("min", "min"),
    ("max", "max"),
    ("std_dev", "std"),
)
_PERCENTILES: Final = (("p90", "p90"), ("p95", "p95"), ("p99", "p99"))


def figures(metrics: Mapping[str, Any], where: str) -> tuple[SummaryFigure, ...]:
    """GuideLLM's printed distributions over its successful requests."""
    found: list[SummaryFigure] = []
    for figure, metric, unit, factor in _DISTRIBUTIONS:
        block = _successful(metrics, metric, where)
        if block is None:
            continue
        at = f"{where}.{metric}.successful"
        percentiles = need_dict(block.get("percentiles", {}), f"{at}.percentiles")
        read = [(block, key, stat, f"{at}.{key}") for key, stat in _STATS]
        read += [(percentiles, key, stat, f"{at}.percentiles.{key}") for key, stat in _PERCENTILES]
        for source, key, stat, path in read:
            value = opt_number(source.get(key), path)
            if value is not None:
                found.append(
                    SummaryFigure(figure=figure, stat=stat, value=value * factor, unit=unit)
                )
        total = opt_number(block.get("total_sum"), f"{where}.{metric}.successful.total_sum")
        if unit == "tokens" and total is not None:
            found.append(SummaryFigure(figure=figure, stat="total", value=total, unit=unit))
    for figure, metric, unit in _RATES:
        block = _successful(metrics, metric, where)
        value = None if block is None else opt_number(block.get("mean"), f"{where}.{metric}")
        if value is not None:
            found.append(SummaryFigure(figure=figure, stat="rate", value=value, unit=unit))
    return tuple(found)


def _successful(metrics: Mapping[str, Any], metric: str, where: str) -> Mapping[str, Any] | None:
    if metrics.get(metric) is None:
        return None
    by_status = need_dict(metrics[metric], f"{where}.{metric}")
    block = by_status.get("successful")
    return None if block is None else need_dict(block, f"{where}.{metric}.successful")
