"""Importer of llm-d-benchmark's benchmark reports (docs/import.md, "llm-d").

llm-d-benchmark converts each harness's native results (inference-perf, GuideLLM, vLLM's
benchmark, ...) into one "benchmark report" per load level: a YAML or JSON document with
a ``version`` and the level's aggregate statistics, never one row per request. Two
format lines exist (llm-d/llm-d-benchmark, docs/import.md, "llm-d", names the files read):

- **0.1**: ``scenario`` (``model.name``, ``load.name`` = the harness) and ``metrics``
  (``time``, ``requests``, ``latency``, ``throughput`` as plain numbers per second);
- **0.2** and its additive revision **0.2.1**: ``run`` (``uid``, ``eid`` = the experiment),
  ``scenario`` (``stack`` of components, ``load.standardized`` with the harness, its
  stage, rate and concurrency) and ``results.request_performance.aggregate``
  (``requests``, ``latency``, ``throughput`` as statistics with units).

Every report becomes one stage; reports of one experiment (0.2: the same ``run.eid``;
0.1: the same model and harness) and one stack make one run. The figures are the
harness's, converted by llm-d-benchmark, so each gets a definition note naming the
harness, except in a report tokenbench wrote itself (``analytics/report/llmd_export.py``).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Container, Mapping
from dataclasses import dataclass
from typing import Any, Final

from analytics.imports.errors import ImportFormatError
from analytics.imports.jsonfile import (
    load_json,
    load_yaml,
    need_dict,
    need_list,
    need_number,
    opt_number,
    opt_text,
)
from analytics.imports.model import (
    DefinitionNote,
    ImportedRun,
    ImportedStage,
    LoadKind,
    SummaryFigure,
)

__all__ = ["FORMATS", "TOOL", "VERSIONS", "recognises", "runs_in"]

TOOL: Final = "llmd"
VERSIONS: Final = ("0.1", "0.2", "0.2.1")
FORMATS: Final = (
    "llm-d benchmark report 0.1 (YAML or JSON)",
    "llm-d benchmark report 0.2 / 0.2.1 (YAML or JSON)",
)
# The harness name a report tokenbench exported carries: its figures are tokenbench's own.
TOKENBENCH: Final = "tokenbench"

_SUFFIXES = (".yaml", ".yml", ".json")
# llm-d names its reports benchmark_report*,_<result>.yaml; its YAML writer sorts the
# keys, so ``version`` comes last and a truncated report may not contain the word.
_REPORT_NAME = "benchmark_report"

# An llm-d statistic's keys and the stat words of SummaryFigure. Not mapped: p0p1 and
# mode (no tokenbench figure is labelled so; docs/import.md, "llm-d").
_STATS: Final = (
    ("mean", "mean"),
    ("stddev", "std"),
    ("min", "min"),
    ("p1", "p1"),
    ("p5", "p5"),
    ("p10", "p10"),
    ("p25", "p25"),
    ("p50", "p50"),
    ("p75", "p75"),
    ("p90", "p90"),
    ("p95", "p95"),
    ("p99", "p99"),
    ("p99p9", "p999"),
    ("max", "max"),
)
# Units the schema allows for each kind of statistic, with the factor to tokenbench's unit.
_TIME = {"ms": 1.0, "s": 1000.0}
_PER_TOKEN = {"ms/token": 1.0, "s/token": 1000.0}
_COUNT = {"count": 1.0}
_TOKEN_RATE = {"tokens/s": 1.0}
_REQUEST_RATE = {"queries/s": 1.0}

# (llm-d latency field, tokenbench figure, allowed units)
_LATENCY: Final = (
    ("time_to_first_token", "ttft", _TIME),
    ("inter_token_latency", "itl", _PER_TOKEN),
    ("time_per_output_token", "tpot", _PER_TOKEN),
    ("request_latency", "e2e", _TIME),
)
_LENGTHS: Final = (("input_length", "prompt_tokens"), ("output_length", "output_tokens"))
_UNIT_OF = {
    "ttft": "ms",
    "itl": "ms",
    "tpot": "ms",
    "e2e": "ms",
    "prompt_tokens": "tokens",
    "output_tokens": "tokens",
}


@dataclass(frozen=True)
class _Report:
    """One report file, read: where it belongs and the stage it becomes."""

    name: str
    data: bytes
    line: str  # "0.1" or "0.2" (0.2.1 is read as 0.2)
    version: str
    group: tuple[str | None, ...]
    model: str
    target: str | None
    harness: str | None
    harness_version: str | None
    started_at: dt.datetime | None
    order: tuple[float, str]
    stage_no: int | None
    uid: str | None
    load_kind: LoadKind
    concurrency: int | None
    rate_per_s: float | None
    started_at_ns: int | None
    duration_s: float | None
    summary: tuple[SummaryFigure, ...]


# --------------------------------------------------------------------------- reading


def _candidate(name: str, data: bytes) -> bool:
    return name.lower().endswith(_SUFFIXES) and (b"version" in data or _REPORT_NAME in name)


def _parse(name: str, data: bytes) -> Any:
    if name.lower().endswith(".json"):
        return load_json(data, name)
    return load_yaml(data, name)


def _shape(doc: Any) -> bool:
    """Whether a parsed document has a benchmark report's top-level fields."""
    if not isinstance(doc, dict) or "version" not in doc:
        return False
    keys = set(doc)
    return {"scenario", "metrics"} <= keys or {"run", "results"} <= keys


def _version(doc: Mapping[str, Any], name: str) -> str:
    value = doc["version"]
    # A hand-written ``version: 0.2`` is a YAML float; it still names the version.
    text = repr(value) if isinstance(value, float) else value
    if not isinstance(text, str) or text not in VERSIONS:
        raise ImportFormatError(
            f"benchmark report version {str(value)[:40]!r} is not one tokenbench reads; expected "
            f"{', '.join(repr(v) for v in VERSIONS)}",
            f"{name}: version",
        )
    return text


def _text(value: Any, where: str) -> str:
    text = opt_text(value, where)
    if text is None:
        raise ImportFormatError("expected text, found nothing", where)
    return text


def _opt_dict(value: Any, where: str) -> Mapping[str, Any]:
    return {} if value is None else need_dict(value, where)


def _count(value: Any, where: str, required: bool = False) -> int | None:
    number = need_number(value, where) if required else opt_number(value, where)
    if number is None:
        return None
    if number < 0 or number != int(number):
        raise ImportFormatError(f"expected a whole number ≥ 0, found {number}", where)
    return int(number)


def _scale(stats: Mapping[str, Any], where: str, units: Mapping[str, float]) -> float:
    """The factor from a statistic's ``units`` to tokenbench's; ImportFormatError for a
    unit the schema does not allow there."""
    unit = opt_text(stats.get("units"), f"{where}.units")
    if unit is None or unit not in units:
        raise ImportFormatError(
            f"units {unit!r}; expected one of {', '.join(units)}", f"{where}.units"
        )
    return units[unit]


def _statistics(
    value: Any, where: str, figure: str, units: Mapping[str, float]
) -> list[SummaryFigure]:
    """An llm-d ``Statistics`` object as summary figures in tokenbench's units."""
    stats = need_dict(value, where)
    scale = _scale(stats, where, units)
    need_number(stats.get("mean"), f"{where}.mean")  # the schema's one required figure
    out = []
    for key, stat in _STATS:
        number = opt_number(stats.get(key), f"{where}.{key}")
        if number is not None:
            out.append(
                SummaryFigure(
                    figure=figure,
                    stat=stat,
                    value=number * scale,
                    unit=_UNIT_OF[figure],
                )
            )
    return out


def _rate(value: Any, where: str, figure: str, units: Mapping[str, float]) -> SummaryFigure:
    """A 0.2 throughput statistic: the rate is its ``mean``."""
    stats = need_dict(value, where)
    rate = need_number(stats.get("mean"), f"{where}.mean") * _scale(stats, where, units)
    unit = "tokens/s" if figure == "output_tokens_per_s" else "requests/s"
    return SummaryFigure(figure=figure, stat="rate", value=rate, unit=unit)


def _common_figures(
    requests: Mapping[str, Any], latency: Mapping[str, Any], where: str
) -> list[SummaryFigure]:
    """Lengths and latencies, alike in both format lines."""
    out: list[SummaryFigure] = []
    for key, figure in _LENGTHS:
        if requests.get(key) is not None:
            out += _statistics(requests[key], f"{where}.requests.{key}", figure, _COUNT)
    for key, figure, units in _LATENCY:
        if latency.get(key) is not None:
            out += _statistics(latency[key], f"{where}.latency.{key}", figure, units)
    return out


def _epoch_ns(seconds: float | None) -> int | None:
    # A float of epoch seconds holds microseconds at best: round there, not to noise.
    return None if seconds is None else round(seconds * 1e6) * 1000


def _instant(value: Any, where: str) -> dt.datetime | None:
    """An ISO-8601 instant; YAML reads an unquoted one as a datetime already."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        moment = value
    elif isinstance(value, str):
        try:
            moment = dt.datetime.fromisoformat(value)
        except ValueError:
            raise ImportFormatError(f"not an ISO-8601 time: {value[:40]!r}", where) from None
    else:
        raise ImportFormatError(f"expected a time, found {type(value).__name__}", where)
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


def _load_kind(concurrency: int | None, rate: float | None) -> LoadKind:
    if rate is not None:
        return "rate"
    return "concurrency" if concurrency is not None else "unknown"


def _read_v01(name: str, data: bytes, doc: Mapping[str, Any], version: str) -> _Report:
    scenario = need_dict(doc["scenario"], f"{name}: scenario")
    metrics = need_dict(doc["metrics"], f"{name}: metrics")
    model = _text(
        need_dict(scenario.get("model"), f"{name}: scenario.model").get("name"),
        f"{name}: scenario.model.name",
    )
    load = need_dict(scenario.get("load"), f"{name}: scenario.load")
    harness = _text(load.get("name"), f"{name}: scenario.load.name")
    time = need_dict(metrics.get("time"), f"{name}: metrics.time")
    duration = need_number(time.get("duration"), f"{name}: metrics.time.duration")
    start = opt_number(time.get("start"), f"{name}: metrics.time.start")
    requests = need_dict(metrics.get("requests"), f"{name}: metrics.requests")
    _count(requests.get("total"), f"{name}: metrics.requests.total", required=True)
    _count(requests.get("failures"), f"{name}: metrics.requests.failures")
    latency = _opt_dict(metrics.get("latency"), f"{name}: metrics.latency")
    summary = _common_figures(requests, latency, f"{name}: metrics")
    throughput = _opt_dict(metrics.get("throughput"), f"{name}: metrics.throughput")
    for key, figure, unit in (
        ("output_tokens_per_sec", "output_tokens_per_s", "tokens/s"),
        ("requests_per_sec", "requests_per_s", "requests/s"),
    ):
        rate = opt_number(throughput.get(key), f"{name}: metrics.throughput.{key}")
        if rate is not None:
            summary.append(SummaryFigure(figure=figure, stat="rate", value=rate, unit=unit))
    return _Report(
        name=name,
        data=data,
        line="0.1",
        version=version,
        group=("0.1", model, harness),
        model=model,
        target=None,
        harness=harness,
        harness_version=None,
        started_at=None if start is None else dt.datetime.fromtimestamp(start, dt.UTC),
        order=(start if start is not None else math.inf, name),
        stage_no=None,
        uid=None,
        load_kind="unknown",
        concurrency=None,
        rate_per_s=None,
        started_at_ns=_epoch_ns(start),
        duration_s=duration,
        summary=tuple(summary),
    )


def _stack(scenario: Mapping[str, Any], name: str) -> tuple[str | None, str | None]:
    """The stack's first model name and its components' labels, as the report names them."""
    model = None
    labels = []
    stack = need_list(scenario.get("stack") or [], f"{name}: scenario.stack")
    for i, item in enumerate(stack):
        where = f"{name}: scenario.stack[{i}]"
        component = need_dict(item, where)
        meta = _opt_dict(component.get("metadata"), f"{where}.metadata")
        label = opt_text(meta.get("label"), f"{where}.metadata.label")
        if label:
            labels.append(label)
        standard = _opt_dict(component.get("standardized"), f"{where}.standardized")
        named = _opt_dict(standard.get("model"), f"{where}.standardized.model")
        model = model or opt_text(named.get("name"), f"{where}.standardized.model.name")
    return model, (", ".join(labels) or None)


def _read_v02(name: str, data: bytes, doc: Mapping[str, Any], version: str) -> _Report:
    run = need_dict(doc["run"], f"{name}: run")
    results = need_dict(doc["results"], f"{name}: results")
    scenario = _opt_dict(doc.get("scenario"), f"{name}: scenario")
    uid = opt_text(run.get("uid"), f"{name}: run.uid")
    eid = opt_text(run.get("eid"), f"{name}: run.eid")
    time = _opt_dict(run.get("time"), f"{name}: run.time")
    started_at = _instant(time.get("start"), f"{name}: run.time.start")
    model, target = _stack(scenario, name)
    load = _opt_dict(scenario.get("load"), f"{name}: scenario.load")
    std = _opt_dict(load.get("standardized"), f"{name}: scenario.load.standardized")
    where = f"{name}: scenario.load.standardized"
    harness = opt_text(std.get("tool"), f"{where}.tool")
    harness_version = opt_text(std.get("tool_version"), f"{where}.tool_version")
    stage_no = _count(std.get("stage"), f"{where}.stage")
    rate = opt_number(std.get("rate_qps"), f"{where}.rate_qps")
    # ``.inf`` (no limit) reads as None, like an absent concurrency.
    concurrency = _count(std.get("concurrency"), f"{where}.concurrency")
    perf = _opt_dict(results.get("request_performance"), f"{name}: results.request_performance")
    where = f"{name}: results.request_performance.aggregate"
    aggregate = _opt_dict(perf.get("aggregate"), where)
    requests = _opt_dict(aggregate.get("requests"), f"{where}.requests")
    if requests:
        _count(requests.get("total"), f"{where}.requests.total", required=True)
        _count(requests.get("failures"), f"{where}.requests.failures")
    latency = _opt_dict(aggregate.get("latency"), f"{where}.latency")
    summary = _common_figures(requests, latency, where)
    throughput = _opt_dict(aggregate.get("throughput"), f"{where}.throughput")
    if throughput.get("output_token_rate") is not None:
        key = f"{where}.throughput.output_token_rate"
        summary.append(
            _rate(throughput["output_token_rate"], key, "output_tokens_per_s", _TOKEN_RATE)
        )
    # ``request_rate``; the first 0.2 schema spelled it ``requests_rate``.
    for key in ("request_rate", "requests_rate"):
        if throughput.get(key) is not None:
            rate_where = f"{where}.throughput.{key}"
            summary.append(_rate(throughput[key], rate_where, "requests_per_s", _REQUEST_RATE))
            break
    return _Report(
        name=name,
        data=data,
        line="0.2",
        version=version,
        group=("0.2", eid or uid or name, model, target, harness, harness_version),
        model=model or "unknown",
        target=target,
        harness=harness,
        harness_version=harness_version,
        started_at=started_at,
        order=(float(stage_no or 0), name),
        stage_no=stage_no,
        uid=uid,
        load_kind=_load_kind(concurrency, rate),
        concurrency=concurrency,
        rate_per_s=rate,
        started_at_ns=None,
        duration_s=None,
        summary=tuple(summary),
    )


def _read(name: str, data: bytes) -> _Report | None:
    """The report in one file; None for a file that is not one (another tool's, say)."""
    doc = _parse(name, data)
    if not _shape(doc):
        if _REPORT_NAME in name:
            raise ImportFormatError(
                "not an llm-d benchmark report: expected the top-level fields version, "
                "scenario and metrics (0.1) or version, run and results (0.2)",
                name,
            )
        return None
    version = _version(doc, name)
    if version == "0.1":
        return _read_v01(name, data, doc, version)
    return _read_v02(name, data, doc, version)


# --------------------------------------------------------------------------- the runs


def _notes(harness: str | None, figures: Container[str]) -> tuple[DefinitionNote, ...]:
    """Where the harness's figures may differ from tokenbench's (docs/metrics.md)."""
    if harness == TOKENBENCH:
        return ()  # a report tokenbench exported: its own definitions
    who = f"the {harness} harness" if harness else "the harness (the report names none)"
    texts = {
        "ttft": f"llm-d's time_to_first_token is the TTFT of {who}, converted by "
        "llm-d-benchmark: what that tool counts as the first token and when it starts "
        "its clock may differ from tokenbench's (first content token, from the send).",
        "itl": f"llm-d's inter_token_latency is {who}'s, in ms per token: some harnesses "
        "average it per request or across requests instead of taking every gap between "
        "token events as tokenbench does.",
        "tpot": f"llm-d's time_per_output_token is {who}'s; llm-d's schema warns that "
        "TPOT and ITL mean different things in different harnesses.",
        "e2e": f"llm-d's request_latency is {who}'s end-to-end latency, from that "
        "tool's own start of a request.",
        "output_tokens_per_s": f"llm-d's output token rate is {who}'s, over that tool's "
        "own duration of the run, not tokenbench's steady-state window.",
        "requests_per_s": f"llm-d's request rate is {who}'s; it may count failed "
        "requests, which tokenbench's request rate leaves out.",
    }
    return tuple(DefinitionNote(figure=f, note=t) for f, t in texts.items() if f in figures)


def _label(report: _Report, clash: bool) -> str:
    if report.line == "0.1":
        return report.name.rsplit(".", 1)[0]
    label = f"stage {report.stage_no if report.stage_no is not None else 0}"
    return f"{label} ({report.uid or report.name})" if clash else label


def _run(reports: list[_Report]) -> ImportedRun:
    """One run from the reports of one experiment and stack, ordered by stage."""
    # Imported here: analytics.imports.tools imports this module.
    from analytics.imports.tools import described  # noqa: PLC0415

    reports = sorted(reports, key=lambda r: r.order)
    first = reports[0]
    labels = [_label(r, clash=False) for r in reports]
    stages = [
        ImportedStage(
            index=i,
            label=_label(r, clash=labels.count(labels[i]) > 1),
            load_kind=r.load_kind,
            concurrency=r.concurrency,
            rate_per_s=r.rate_per_s,
            started_at_ns=r.started_at_ns,
            duration_s=r.duration_s,
            summary=r.summary,
        )
        for i, r in enumerate(reports)
    ]
    figures = {f.figure for r in reports for f in r.summary}
    starts = [r.started_at for r in reports if r.started_at is not None]
    harness = f", harness {first.harness}" if first.harness else ""
    return ImportedRun(
        tool=TOOL,
        tool_version=first.harness_version,
        format=f"llm-d benchmark report {first.version}{harness}",
        model=first.model,
        target=first.target,
        started_at=min(starts) if starts else None,
        per_request=False,
        stages=tuple(stages),
        notes=_notes(first.harness, figures),
        files=tuple(described(r.name, r.data) for r in reports),
    )


def recognises(files: Mapping[str, bytes]) -> bool:
    """Whether one of these files is an llm-d benchmark report (of any version: an
    unknown one is then refused by name)."""
    for name, data in files.items():
        if not _candidate(name, data):
            continue
        try:
            if _shape(_parse(name, data)):
                return True
        except ImportFormatError:
            continue
    return False


def runs_in(files: Mapping[str, bytes]) -> list[ImportedRun]:
    """The runs in these report files. llm-d writes each report twice, as 0.1 and as
    0.2, beside each other: where both lines are present only the 0.2 reports are read."""
    reports = [
        report
        for name in sorted(files)
        if _candidate(name, files[name]) and (report := _read(name, files[name])) is not None
    ]
    if any(r.line == "0.2" for r in reports):
        reports = [r for r in reports if r.line == "0.2"]
    groups: dict[tuple[str | None, ...], list[_Report]] = {}
    for report in reports:
        groups.setdefault(report.group, []).append(report)
    return [_run(group) for group in groups.values()]
