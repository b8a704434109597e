"""AIPerf's summary, ``profile_export_aiperf.json``: the figures AIPerf printed and the
settings of the command (``input_config``), for ``aiperf`` (docs/import.md, "AIPerf")."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from analytics.imports.errors import ImportFormatError
from analytics.imports.jsonfile import (
    load_json,
    need_dict,
    need_list,
    opt_count,
    opt_number,
    opt_text,
)
from analytics.imports.model import Figure, LoadKind, SummaryFigure

__all__ = ["SCHEMA_VERSIONS", "Summary", "read_summary", "to_ms"]

SCHEMA_VERSIONS: Final = ("1.4",)  # AIPerf 0.13.0
MS_PER_UNIT: Final = {"ms": 1.0, "ns": 1e-6, "us": 1e-3, "sec": 1000.0, "s": 1000.0}

# (tokenbench figure, AIPerf metric, unit) of the distributions; the stats read of each.
_DISTRIBUTIONS: Final[tuple[tuple[Figure, str, str], ...]] = (
    ("ttft", "time_to_first_token", "ms"),
    ("itl", "inter_chunk_latency", "ms"),
    ("tpot", "inter_token_latency", "ms"),
    ("e2e", "request_latency", "ms"),
    ("prompt_tokens", "input_sequence_length", "tokens"),
    ("output_tokens", "output_sequence_length", "tokens"),
)
_STATS: Final = {"p50": "p50", "p90": "p90", "p95": "p95", "p99": "p99", "avg": "mean"}
_STATS_MORE: Final = {"min": "min", "max": "max", "std": "std"}
# (figure, AIPerf metric, stat, unit, the unit AIPerf writes) of the single values.
_SCALARS: Final[tuple[tuple[Figure, str, str, str, str], ...]] = (
    ("output_tokens_per_s", "output_token_throughput", "rate", "tokens/s", "tokens/sec"),
    ("requests_per_s", "request_throughput", "rate", "requests/s", "requests/sec"),
    ("prompt_tokens", "total_isl", "total", "tokens", "tokens"),
    ("output_tokens", "total_osl", "total", "tokens", "tokens"),
)


@dataclass(frozen=True)
class Summary:
    """What the summary file says of the run."""

    version: str | None
    model: str
    target: str | None
    load_kind: LoadKind
    label: str
    concurrency: int | None
    duration_s: float | None
    figures: tuple[SummaryFigure, ...]


def read_summary(data: bytes, name: str) -> Summary:
    """The summary in ``data``; ImportFormatError for another schema or a malformed one.
    Its ``start_time`` is not read: a local time without a zone."""
    summary = need_dict(load_json(data, name), name)
    version = summary.get("schema_version")
    if version not in SCHEMA_VERSIONS:
        raise ImportFormatError(
            f"schema_version {version!r} is not one tokenbench reads; expected "
            f"{', '.join(SCHEMA_VERSIONS)} (AIPerf 0.13)",
            f"{name}: schema_version",
        )
    config = need_dict(summary.get("input_config", {}), f"{name}: input_config")
    load_kind, label, concurrency = _load(config, f"{name}: input_config")
    duration = _duration(summary, name)
    return Summary(
        version=opt_text(summary.get("aiperf_version"), f"{name}: aiperf_version"),
        model=_model(config, f"{name}: input_config.models"),
        target=_target(config, f"{name}: input_config.endpoint"),
        load_kind=load_kind,
        label=label,
        concurrency=concurrency,
        duration_s=None if duration is None else duration / 1000.0,
        figures=_figures(summary, name),
    )


def to_ms(value: float, unit: str, where: str) -> float:
    """A duration in ``unit`` (as AIPerf writes it) in milliseconds."""
    factor = MS_PER_UNIT.get(unit)
    if factor is None:
        raise ImportFormatError(f"unit {unit!r}; expected one of {', '.join(MS_PER_UNIT)}", where)
    if value < 0:
        raise ImportFormatError(f"a negative duration ({value})", where)
    return value * factor


def _entry(summary: Mapping[str, Any], tag: str, name: str) -> Mapping[str, Any] | None:
    """One metric of the summary (``unit``, ``avg``, ``p50``...), None when absent."""
    if summary.get(tag) is None:
        return None
    return need_dict(summary[tag], f"{name}: {tag}")


def _figures(summary: Mapping[str, Any], name: str) -> tuple[SummaryFigure, ...]:
    """The figures as AIPerf printed them, its durations in ms."""
    figures: list[SummaryFigure] = []
    for figure, tag, unit in _DISTRIBUTIONS:
        entry = _entry(summary, tag, name)
        if entry is None:
            continue
        written = str(entry.get("unit"))
        if unit == "tokens" and written != "tokens":
            raise ImportFormatError(f"unit {written!r}; expected 'tokens'", f"{name}: {tag}.unit")
        for key, stat in (_STATS | _STATS_MORE).items():
            value = opt_number(entry.get(key), f"{name}: {tag}.{key}")
            if value is not None and unit == "ms":
                value = to_ms(value, written, f"{name}: {tag}.{key}")
            if value is not None:
                figures.append(SummaryFigure(figure=figure, stat=stat, value=value, unit=unit))
    for figure, tag, stat, unit, written in _SCALARS:
        entry = _entry(summary, tag, name)
        if entry is None:
            continue
        if entry.get("unit") != written:
            raise ImportFormatError(
                f"unit {entry.get('unit')!r}; expected {written!r}", f"{name}: {tag}.unit"
            )
        value = opt_number(entry.get("avg"), f"{name}: {tag}.avg")
        if value is not None:
            figures.append(SummaryFigure(figure=figure, stat=stat, value=value, unit=unit))
    return tuple(figures)


def _duration(summary: Mapping[str, Any], name: str) -> float | None:
    """``benchmark_duration`` in ms: AIPerf's first send to its last response."""
    entry = _entry(summary, "benchmark_duration", name)
    value = None if entry is None else opt_number(entry.get("avg"), f"{name}: benchmark_duration")
    if entry is None or value is None:
        return None
    return to_ms(value, str(entry.get("unit")), f"{name}: benchmark_duration.unit")


def _load(config: Mapping[str, Any], where: str) -> tuple[LoadKind, str, int | None]:
    """(load kind, label, concurrency) of the profiling phase (``phases[].kind``)."""
    phases = need_list(config.get("phases", []), f"{where}.phases")
    for index, item in enumerate(phases):
        phase = need_dict(item, f"{where}.phases[{index}]")
        if phase.get("kind") != "profiling":
            continue
        kind = opt_text(phase.get("type"), f"{where}.phases[{index}].type") or "unknown"
        level = opt_count(phase.get("concurrency"), f"{where}.phases[{index}].concurrency")
        if kind == "concurrency" and level is not None:
            return "concurrency", f"concurrency {level}", level
        # Other phase types (request rates, schedules) are not in the fixtures: named only.
        return "unknown", kind, level
    return "unknown", "aiperf run", None


def _model(config: Mapping[str, Any], where: str) -> str:
    models = need_dict(config.get("models", {}), where)
    items = need_list(models.get("items", []), f"{where}.items")
    names = [
        opt_text(need_dict(item, f"{where}.items[{i}]").get("name"), f"{where}.items[{i}].name")
        for i, item in enumerate(items)
    ]
    return ", ".join(found for found in names if found)


def _target(config: Mapping[str, Any], where: str) -> str | None:
    endpoint = need_dict(config.get("endpoint", {}), where)
    urls = need_list(endpoint.get("urls", []), f"{where}.urls")
    return opt_text(urls[0], f"{where}.urls[0]") if urls else None
