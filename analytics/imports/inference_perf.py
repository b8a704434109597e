"""Importer of inference-perf's lifecycle reports (docs/import.md).

One reports folder is one run: ``stage_N_lifecycle_metrics.json`` summarises stage N,
``per_request_lifecycle_metrics.json`` (when the run wrote it) has a row a request, with
monotonic times and no stage id. Stages run one after another, so the rows sorted by
their start fall into the stages in order, as many as each stage file counts; the split
is checked against each stage's span. ``config.yaml`` names the model and the endpoint,
``inference-perf.partial.stage_N.yaml`` a stage's wall-clock start. No file names the
inference-perf version: the format is recognised by its names and keys.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from itertools import pairwise
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
    Figure,
    ImportedRequest,
    ImportedRun,
    ImportedStage,
    LoadKind,
    SummaryFigure,
)

__all__ = ["FORMATS", "TOOL", "recognises", "runs_in"]

TOOL: Final = "inference-perf"
FORMAT: Final = "inference-perf lifecycle reports"
FORMATS: Final = (
    f"{FORMAT} (stage_N_lifecycle_metrics.json, per_request_lifecycle_metrics.json; "
    "read from inference-perf 0.7.0, the files name no version)",
)

_STAGE_FILE: Final = re.compile(r"stage_(\d+)_lifecycle_metrics\.json")
_PER_REQUEST: Final = "per_request_lifecycle_metrics.json"
_SUMMARY: Final = "summary_lifecycle_metrics.json"
_CONFIG: Final = "config.yaml"
_PARTIAL: Final = "inference-perf.partial.stage_{}.yaml"
_SPAN_TOLERANCE_S: Final = 0.001  # the stage span and the rows' span are the same floats
_LATENCIES: Final[tuple[tuple[str, Figure], ...]] = (
    ("time_to_first_token", "ttft"),
    ("inter_token_latency", "itl"),
    ("time_per_output_token", "tpot"),
    ("request_latency", "e2e"),
)
_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_STAT: Final = re.compile(r"mean|min|max|median|p\d+(?:\.\d+)?")

_REQUIRED: Final = ("benchmark_time_seconds", "load_summary", "successes", "failures")
_NOTES: Final[dict[Figure, str]] = {
    "ttft": (
        "inference-perf's first token is the first chunk with non-empty content or text; "
        "reasoning does not count, so against a reasoning model its TTFT is tokenbench's "
        "time to first output token."
    ),
    "itl": (
        "inference-perf's inter_token_latency has a gap per token, every token of a chunk "
        "at the chunk's time (0 ms gaps where a chunk re-tokenizes to several); the rows "
        "here keep one gap per chunk, as tokenbench does."
    ),
    "output_tokens": (
        "inference-perf's output tokens are the server's usage.completion_tokens, or where "
        "the server sent none the answer re-tokenized with its tokenizer (tokenbench counts "
        "events)."
    ),
}
# Unless report.request_lifecycle.use_server_output_tokens is set.
_CLIENT_COUNT_NOTES: Final[dict[Figure, str]] = {
    "tpot": (
        "inference-perf's time_per_output_token divides by its re-tokenized output count, "
        "not the server's."
    ),
    "output_tokens_per_s": (
        "inference-perf's output_tokens_per_sec counts its re-tokenized output tokens, "
        "not the server's."
    ),
}
_MOCK_NOTE: Final = (
    "config.yaml says data.type: mock: the prompts were inference-perf's placeholder "
    "'mock prompt N' of a few tokens, not a chosen workload."
)


def recognises(files: Mapping[str, bytes]) -> bool:
    """Whether these are an inference-perf reports folder's files."""
    return any(
        (_STAGE_FILE.fullmatch(name) or name == _SUMMARY) and b'"load_summary"' in data
        for name, data in files.items()
    )


def runs_in(files: Mapping[str, bytes]) -> list[ImportedRun]:
    """The one run of a reports folder."""
    from analytics.imports.tools import described  # noqa: PLC0415 - tools imports this module

    numbered = sorted((int(m[1]), name) for name in files if (m := _STAGE_FILE.fullmatch(name)))
    if not numbered and _SUMMARY not in files:
        return []
    # Without per-stage reports the run-wide summary is the one stage there is.
    indices = [n for n, _ in numbered] or [0]
    labels = [f"stage_{n}" for n, _ in numbered] or ["all stages"]
    reports = [
        (name, _report(files[name], name)) for name in [n for _, n in numbered] or [_SUMMARY]
    ]
    config = load_yaml(files[_CONFIG], _CONFIG) if _CONFIG in files else {}
    items = None
    if _PER_REQUEST in files:
        items = need_list(load_json(files[_PER_REQUEST], _PER_REQUEST), _PER_REQUEST)
    groups = _split(None if items is None else _rows(items), reports)
    stages = [
        _stage(n, label, report, group, _started_ns(files, _PARTIAL.format(n)))
        for n, label, report, group in zip(indices, labels, reports, groups, strict=True)
    ]
    extra = (_PER_REQUEST, _CONFIG, *(_PARTIAL.format(n) for n in indices))
    used = [name for name, _ in reports] + [name for name in extra if name in files]
    starts = [stage.started_at_ns for stage in stages if stage.started_at_ns is not None]
    return [
        ImportedRun(
            tool=TOOL,
            tool_version=None,  # no report names the inference-perf version
            format=FORMAT,
            model=_model(config, items) or "unknown",
            target=opt_text(_get(config, "server", "base_url"), f"{_CONFIG}: server.base_url"),
            started_at=dt.datetime.fromtimestamp(min(starts) / 1e9, dt.UTC) if starts else None,
            per_request=items is not None,
            stages=tuple(stages),
            notes=_notes(config),
            files=tuple(described(name, files[name]) for name in used),
        )
    ]


def _report(data: bytes, name: str) -> Mapping[str, Any]:
    doc = need_dict(load_json(data, name), name)
    missing = [key for key in _REQUIRED if key not in doc]
    if missing:
        raise ImportFormatError(
            f"not an inference-perf lifecycle report: no {', '.join(missing)}; expected "
            f"{FORMATS[0]}",
            name,
        )
    return doc


def _get(value: Any, *keys: str) -> Any:
    """A nested value of a parsed document, None where a level is missing."""
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _notes(config: Any) -> tuple[DefinitionNote, ...]:
    notes = dict(_NOTES)
    if _get(config, "report", "request_lifecycle", "use_server_output_tokens") is not True:
        notes |= _CLIENT_COUNT_NOTES
    if _get(config, "data", "type") == "mock":
        notes["workload"] = _MOCK_NOTE
    return tuple(DefinitionNote(figure=figure, note=note) for figure, note in notes.items())


def _model(config: Any, items: list[Any] | None) -> str | None:
    """config.yaml's server.model_name, else the model the first request asked for."""
    model = opt_text(_get(config, "server", "model_name"), f"{_CONFIG}: server.model_name")
    body = _get(items[0], "request") if model is None and items else None
    if isinstance(body, str):  # the JSON body as sent
        sent = load_json(body.encode(), f"{_PER_REQUEST}: [0].request")
        model = opt_text(_get(sent, "model"), f"{_PER_REQUEST}: [0].request.model")
    return model


Row = tuple[float, float, ImportedRequest]  # start, end (monotonic s), the request


def _rows(items: list[Any]) -> list[Row]:
    """The requests of per_request_lifecycle_metrics.json, in the order they started."""
    rows = [_row(need_dict(item, f"{_PER_REQUEST}: [{i}]"), i) for i, item in enumerate(items)]
    return sorted(rows, key=lambda row: row[0])


def _row(item: Mapping[str, Any], i: int) -> Row:
    where = f"{_PER_REQUEST}: [{i}]"
    start = need_number(item.get("start_time"), f"{where}.start_time")
    end = need_number(item.get("end_time"), f"{where}.end_time")
    info = need_dict(item.get("info") or {}, f"{where}.info")
    at = f"{where}.info.response_metrics"
    response = need_dict(info.get("response_metrics") or {}, at)
    usage = need_dict(response.get("server_usage") or {}, f"{at}.server_usage")
    stamps = need_list(response.get("output_token_times") or [], f"{at}.output_token_times")
    times = [need_number(t, f"{at}.output_token_times[{k}]") for k, t in enumerate(stamps)]
    # One event per chunk: the tool gives each token of a chunk the chunk's time.
    events = [t for k, t in enumerate(times) if k == 0 or t != times[k - 1]]
    prompt = _get(info, "request_metrics", "text", "input_tokens")
    if prompt is None:
        prompt = info.get("input_tokens")  # the older, top-level mirror of the same count
    # The server's count, as tokenbench's; the tool's re-tokenized one where none came.
    output = usage.get("completion_tokens")
    if output is None:
        output = response.get("output_tokens")
    error = item.get("error")
    ok = error is None
    request = ImportedRequest(
        ok=ok,
        ttft_ms=(times[0] - start) * 1000 if times else None,
        e2e_ms=(end - start) * 1000,
        itl_ms=tuple((b - a) * 1000 for a, b in pairwise(events)) if times else None,
        prompt_tokens=_count(prompt, f"{where}.info.request_metrics.text.input_tokens"),
        output_tokens=_count(output, f"{at}.server_usage.completion_tokens") if ok else None,
        error=None if ok else _error(error, f"{where}.error"),
    )
    return start, end, request


def _count(value: Any, where: str) -> int | None:
    """A whole number >= 0, or None."""
    number = opt_number(value, where)
    if number is None:
        return None
    if number < 0 or number != int(number):
        raise ImportFormatError(f"expected a token count, found {number:g}", where)
    return int(number)


def _error(error: Any, where: str) -> str:
    fields = need_dict(error, where)
    kind = opt_text(fields.get("error_type"), f"{where}.error_type")
    message = opt_text(fields.get("error_msg"), f"{where}.error_msg")
    return ": ".join(part for part in (kind, message) if part) or "failed"


def _split(
    rows: list[Row] | None, reports: list[tuple[str, Mapping[str, Any]]]
) -> list[tuple[ImportedRequest, ...]]:
    """The rows of each stage: the next ``load_summary.count`` rows by start, checked
    against the stage's span (``benchmark_time_seconds``)."""
    if rows is None:
        return [() for _ in reports]
    counts = []
    for name, doc in reports:  # a stage without a count cannot be matched to its rows
        where = f"{name}: load_summary.count"
        counts.append(_count(need_number(_get(doc, "load_summary", "count"), where), where) or 0)
    if sum(counts) != len(rows):
        raise ImportFormatError(
            f"{len(rows)} requests, but the stage reports count {sum(counts)}", _PER_REQUEST
        )
    groups: list[tuple[ImportedRequest, ...]] = []
    for (name, doc), count in zip(reports, counts, strict=True):
        group, rows = rows[:count], rows[count:]
        span = need_number(doc.get("benchmark_time_seconds"), f"{name}: benchmark_time_seconds")
        if group and abs(max(r[1] for r in group) - group[0][0] - span) > _SPAN_TOLERANCE_S:
            raise ImportFormatError(
                f"the requests do not fall into the stages in order: the {count} of {name} "
                f"span {max(r[1] for r in group) - group[0][0]:.3f} s, the stage {span:.3f} s",
                _PER_REQUEST,
            )
        # Offsets on the tool's monotonic clock, placed at the stage's wall-clock start.
        first = group[0][0] if group else 0.0
        groups.append(
            tuple(r[2].model_copy(update={"start_offset_ms": (r[0] - first) * 1000}) for r in group)
        )
    return groups


def _stage(
    n: int,
    label: str,
    report: tuple[str, Mapping[str, Any]],
    requests: tuple[ImportedRequest, ...],
    started_at_ns: int | None,
) -> ImportedStage:
    name, doc = report
    load = need_dict(doc.get("load_summary"), f"{name}: load_summary")
    concurrency = _count(load.get("concurrency"), f"{name}: load_summary.concurrency")
    rate = opt_number(load.get("requested_rate"), f"{name}: load_summary.requested_rate")
    kind: LoadKind = "concurrency" if concurrency is not None else "rate" if rate else "unknown"
    span = need_number(doc.get("benchmark_time_seconds"), f"{name}: benchmark_time_seconds")
    if span < 0 or (rate is not None and rate < 0):
        raise ImportFormatError("a negative duration or rate", name)
    return ImportedStage(
        index=n,
        label=label,
        load_kind=kind,
        concurrency=concurrency,
        # A concurrent stage's requested_rate is a config default, not the load it ran.
        rate_per_s=rate if kind == "rate" else None,
        started_at_ns=started_at_ns,
        duration_s=span,
        requests=requests,
        summary=_summary(doc, name),
    )


def _started_ns(files: Mapping[str, bytes], name: str) -> int | None:
    """A stage's wall-clock start from its partial report (run.time.start), if any."""
    if name not in files:
        return None
    start = _get(load_yaml(files[name], name), "run", "time", "start")
    if start is None:
        return None
    try:
        when = dt.datetime.fromisoformat(str(start))
    except ValueError:
        raise ImportFormatError(
            f"not a time: {str(start)[:40]!r}", f"{name}: run.time.start"
        ) from None
    if when.tzinfo is None:
        raise ImportFormatError("a time with no zone", f"{name}: run.time.start")
    return (when - _EPOCH) // dt.timedelta(microseconds=1) * 1000


def _summary(doc: Mapping[str, Any], name: str) -> tuple[SummaryFigure, ...]:
    where = f"{name}: successes"
    successes = need_dict(doc.get("successes"), where)
    latency = need_dict(successes.get("latency") or {}, f"{where}.latency")
    figures: list[SummaryFigure] = []
    for key, figure in _LATENCIES:  # seconds in the file
        figures += _stats(latency.get(key), figure, 1000.0, "ms", f"{where}.latency.{key}")
    for key, figure in (("prompt_tokens", "prompt_tokens"), ("output_tokens", "output_tokens")):
        figures += _stats(successes.get(key), figure, 1.0, "tokens", f"{where}.{key}")
    throughput = need_dict(successes.get("throughput") or {}, f"{where}.throughput")
    for key, figure, unit in (
        ("output_tokens_per_sec", "output_tokens_per_s", "tokens/s"),
        ("requests_per_sec", "requests_per_s", "requests/s"),
    ):
        value = opt_number(throughput.get(key), f"{where}.throughput.{key}")
        if value is not None:
            figures.append(SummaryFigure(figure=figure, stat="rate", value=value, unit=unit))
    return tuple(figures)


def _stats(value: Any, figure: Figure, scale: float, unit: str, where: str) -> list[SummaryFigure]:
    """The figures of one distribution (null when the stage had no value)."""
    if value is None:
        return []
    figures = []
    for stat, raw in need_dict(value, where).items():
        if stat != "total" and not _STAT.fullmatch(stat):
            continue  # cached/uncached prompt tokens: no column of tokenbench's
        number = opt_number(raw, f"{where}.{stat}")
        if number is not None:
            name = "p50" if stat == "median" else stat
            figures.append(SummaryFigure(figure=figure, stat=name, value=number * scale, unit=unit))
    return figures
