"""Importer of NVIDIA AIPerf's result files (docs/import.md, "AIPerf").

One AIPerf folder is one run of one load level: ``profile_export.jsonl`` holds a record
per request (``metadata`` with wall-clock ``request_start_ns``, ``metrics`` as
``{"value", "unit"}``, ``error``), ``profile_export_aiperf.json`` the summary AIPerf
printed and the command's settings (``input_config``). Either imports alone: the records
as a per-request run without the tool's summary, the summary as a summary-only run.
A custom ``--profile-export-prefix P`` names them ``P.jsonl`` and ``P_aiperf.json``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any, Final

from analytics.imports.aiperf_summary import SCHEMA_VERSIONS, Summary, read_summary, to_ms
from analytics.imports.errors import ImportFormatError
from analytics.imports.jsonfile import (
    iter_jsonl,
    need_dict,
    need_list,
    opt_count,
    opt_number,
    opt_text,
)
from analytics.imports.model import (
    DefinitionNote,
    ImportedRequest,
    ImportedRun,
    ImportedStage,
)

__all__ = ["FORMATS", "TOOL", "recognises", "runs_in"]

TOOL: Final = "aiperf"
FORMATS: Final = (
    "AIPerf 0.13 profile_export.jsonl (per request)",
    f"AIPerf 0.13 profile_export_aiperf.json (summary, schema_version {SCHEMA_VERSIONS[0]})",
)

_DEFAULT_PREFIX: Final = "profile_export"
_SUMMARY_SUFFIX: Final = "_aiperf.json"
_MAX_NS: Final = 2**63 - 1

_NOTES: Final = (
    DefinitionNote(
        figure="itl",
        note="ITL is AIPerf's inter_chunk_latency, the gap between consecutive responses "
        "that carried content, as tokenbench counts it; AIPerf's own 'Inter Token Latency' "
        "is a mean per request and is shown as TPOT.",
    ),
    DefinitionNote(
        figure="tpot",
        note="AIPerf's inter_token_latency is (request_latency - time_to_first_token) / "
        "(output tokens - 1) per request, tokenbench's TPOT, with the output tokens counted "
        "by AIPerf's tokenizer.",
    ),
    DefinitionNote(
        figure="e2e",
        note="AIPerf's request_latency ends at the last response that carried content, "
        "not at the end of the stream: the finish, usage and [DONE] events are not in it.",
    ),
    DefinitionNote(
        figure="output_tokens",
        note="Rows take the server's usage_completion_tokens where a record has it, else "
        "AIPerf's output_sequence_length (its tokenizer's count of the text); AIPerf's "
        "printed lengths and token throughputs use its tokenizer's count.",
    ),
    DefinitionNote(
        figure="prompt_tokens",
        note="Rows take the server's usage_prompt_tokens where a record has it, else "
        "AIPerf's input_sequence_length (its tokenizer's count of the prompt it made); "
        "AIPerf's printed lengths use its tokenizer's count.",
    ),
    DefinitionNote(
        figure="output_tokens_per_s",
        note="AIPerf's output_token_throughput counts output tokens with its tokenizer, "
        "over the profiling phase's duration as AIPerf times it.",
    ),
)


def recognises(files: Mapping[str, bytes]) -> bool:
    """Whether these files are AIPerf's: its records or its summary by name."""
    return any(
        name == f"{_DEFAULT_PREFIX}.jsonl" or name.endswith(_SUMMARY_SUFFIX) for name in files
    )


def runs_in(files: Mapping[str, bytes]) -> list[ImportedRun]:
    """The one run in an AIPerf folder: per request from the ``.jsonl`` (with the
    summary's figures when the ``_aiperf.json`` is beside it), else summary only."""
    from analytics.imports.tools import described  # noqa: PLC0415 (tools imports us)

    records_name, summary_name = _names(files)
    summary = read_summary(files[summary_name], summary_name) if summary_name else None
    rows = _requests(files[records_name], records_name) if records_name else None
    read = [name for name in (records_name, summary_name) if name]
    stage = _stage(summary, rows or ())
    first = stage.started_at_ns
    return [
        ImportedRun(
            tool=TOOL,
            tool_version=summary.version if summary else None,
            format="aiperf " + " + ".join(read),
            # The records do not name the model: empty when only they are here.
            model=summary.model if summary else "",
            target=summary.target if summary else None,
            started_at=None if first is None else dt.datetime.fromtimestamp(first / 1e9, dt.UTC),
            per_request=rows is not None,
            stages=(stage,),
            notes=_NOTES,
            files=tuple(described(name, files[name]) for name in read),
        )
    ]


def _stage(summary: Summary | None, rows: tuple[ImportedRequest, ...]) -> ImportedStage:
    """The run's one stage: its load from the summary, its start from the records."""
    starts = [row.sent_at_ns for row in rows if row.sent_at_ns is not None]
    return ImportedStage(
        index=0,
        label=summary.label if summary else "aiperf run",
        load_kind=summary.load_kind if summary else "unknown",
        concurrency=summary.concurrency if summary else None,
        started_at_ns=min(starts) if starts else None,
        duration_s=summary.duration_s if summary else None,
        requests=rows,
        summary=summary.figures if summary else (),
    )


def _names(files: Mapping[str, bytes]) -> tuple[str | None, str | None]:
    """(records file, summary file) of the one run in these files."""
    summaries = sorted(name for name in files if name.endswith(_SUMMARY_SUFFIX))
    if len(summaries) > 1:
        raise ImportFormatError(
            f"{len(summaries)} AIPerf summaries ({', '.join(summaries)}): import one run's "
            "folder at a time"
        )
    summary = summaries[0] if summaries else None
    prefix = summary.removesuffix(_SUMMARY_SUFFIX) if summary else _DEFAULT_PREFIX
    records = f"{prefix}.jsonl" if f"{prefix}.jsonl" in files else None
    if records is None and summary is None:
        raise ImportFormatError(
            f"no AIPerf result here; expected {_DEFAULT_PREFIX}.jsonl or "
            f"{_DEFAULT_PREFIX}{_SUMMARY_SUFFIX}"
        )
    return records, summary


# --- per-request records -------------------------------------------------------------


def _requests(data: bytes, name: str) -> tuple[ImportedRequest, ...]:
    rows = []
    for number, document in iter_jsonl(data, name):
        row = _request(document, f"{name} line {number}")
        if row is not None:
            rows.append(row)
    if not rows:
        raise ImportFormatError("no profiling record in it", name)
    return tuple(rows)


def _request(document: Any, where: str) -> ImportedRequest | None:
    """One record as a row; None for a warm-up record (AIPerf's summary leaves those out)."""
    record = need_dict(document, where)
    meta = need_dict(record.get("metadata"), f"{where}: metadata")
    if meta.get("benchmark_phase") == "warmup":
        return None
    raw_metrics = record.get("metrics")
    metrics = {} if raw_metrics is None else need_dict(raw_metrics, f"{where}: metrics")
    error = _error(record.get("error"), f"{where}: error")
    if error is None and meta.get("was_cancelled") is True:
        error = "cancelled"
    at = f"{where}: metrics"
    usage_out = _count(metrics, "usage_completion_tokens", at)
    usage_in = _count(metrics, "usage_prompt_tokens", at)
    reused = _value(metrics, "http_req_connection_reused", at)
    return ImportedRequest(
        ok=error is None,
        sent_at_ns=_ns(meta.get("request_start_ns"), f"{where}: metadata.request_start_ns"),
        ttft_ms=_ms(metrics, "time_to_first_token", at),
        e2e_ms=_ms(metrics, "request_latency", at),
        itl_ms=_gaps(metrics, "inter_chunk_latency", at),
        prompt_tokens=usage_in
        if usage_in is not None
        else _count(metrics, "input_sequence_length", at),
        output_tokens=(
            usage_out if usage_out is not None else _count(metrics, "output_sequence_length", at)
        ),
        error=error,
        request_id=opt_text(meta.get("x_request_id"), f"{where}: metadata.x_request_id"),
        connection_new=None if reused is None else reused == 0,
    )


def _error(value: Any, where: str) -> str | None:
    """AIPerf's error as one line: ``type (code): message``."""
    if value is None:
        return None
    if isinstance(value, str):
        return opt_text(value, where) or "error"
    error = need_dict(value, where)
    kind = opt_text(error.get("type"), f"{where}.type") or "error"
    code = error.get("code")
    message = opt_text(error.get("message"), f"{where}.message")
    head = f"{kind} ({code})" if isinstance(code, int) and not isinstance(code, bool) else kind
    return opt_text(f"{head}: {message}" if message else head, where)


def _metric(metrics: Mapping[str, Any], tag: str, where: str) -> tuple[Any, str] | None:
    """(value, unit) of one metric of a record, None when the record has none."""
    if metrics.get(tag) is None:
        return None
    entry = need_dict(metrics[tag], f"{where}.{tag}")
    unit = entry.get("unit")
    if not isinstance(unit, str):
        raise ImportFormatError("expected a unit", f"{where}.{tag}.unit")
    return entry.get("value"), unit


def _value(metrics: Mapping[str, Any], tag: str, where: str) -> float | None:
    found = _metric(metrics, tag, where)
    return None if found is None else opt_number(found[0], f"{where}.{tag}.value")


def _count(metrics: Mapping[str, Any], tag: str, where: str) -> int | None:
    found = _metric(metrics, tag, where)
    return None if found is None else opt_count(found[0], f"{where}.{tag}.value")


def _ms(metrics: Mapping[str, Any], tag: str, where: str) -> float | None:
    found = _metric(metrics, tag, where)
    if found is None:
        return None
    value = opt_number(found[0], f"{where}.{tag}.value")
    return None if value is None else to_ms(value, found[1], f"{where}.{tag}")


def _gaps(metrics: Mapping[str, Any], tag: str, where: str) -> tuple[float, ...] | None:
    found = _metric(metrics, tag, where)
    if found is None:
        return None
    values = need_list(found[0], f"{where}.{tag}.value")
    gaps = []
    for index, item in enumerate(values):
        at = f"{where}.{tag}.value[{index}]"
        value = opt_number(item, at)
        if value is None:
            raise ImportFormatError("expected a number, found nothing", at)
        gaps.append(to_ms(value, found[1], at))
    return tuple(gaps)


def _ns(value: Any, where: str) -> int:
    """A wall-clock instant in ns since the epoch, read as the integer it is (a float
    would lose the last hundreds of ns)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ImportFormatError(
            f"expected integer nanoseconds, found {type(value).__name__}", where
        )
    if not 0 <= value <= _MAX_NS:
        raise ImportFormatError(f"nanoseconds out of range ({value})", where)
    return value
