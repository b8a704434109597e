"""Importer of GuideLLM's result file, ``benchmarks.json`` (docs/import.md, "GuideLLM").

A GuideLLM run is one file; each of its ``benchmarks[]`` is one load level (a stage): its
strategy, its requests by status (``requests.successful``, ``errored``, ``incomplete``)
and the distributions GuideLLM printed (``metrics``). Two layouts are read:

- report schema 2 (``metadata.version`` 2, GuideLLM 0.8): the settings in ``config``,
  each request's times in ``info.timings`` (Unix seconds, ``time.time()``);
- the layout of GuideLLM 0.2 and 0.3 (no ``metadata``): the settings in each benchmark's
  ``args``, each request's times as ``start_time``/``first_token_time``/``end_time``.

Schema 1 and GuideLLM 0.4's file (``args`` at the top, no ``metadata``) are refused.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any, Final

from analytics.imports.errors import ImportFormatError
from analytics.imports.guidellm_summary import figures
from analytics.imports.jsonfile import (
    load_json,
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
    LoadKind,
)

__all__ = ["FORMATS", "TOOL", "recognises", "runs_in"]

TOOL: Final = "guidellm"
FILE: Final = "benchmarks.json"
FORMATS: Final = (
    "GuideLLM 0.8 benchmarks.json (report schema version 2)",
    "GuideLLM 0.2-0.3 benchmarks.json (no metadata; benchmarks[].args)",
)
_SCHEMA: Final = 2
_LAST_SECOND: Final = (2**63 - 1) // 10**9  # the last second whose ns fit a signed 64-bit int
_STATUSES: Final = ("successful", "errored", "incomplete")

_NOTES: Final = (
    DefinitionNote(
        figure="start",
        note="GuideLLM times each request from its request_start, read from the wall clock "
        "(time.time()) just before the HTTP call, not from a monotonic clock.",
    ),
    DefinitionNote(
        figure="tpot",
        note="GuideLLM's inter_token_latency_ms is (last token - first token) / (output "
        "tokens - 1) per request, tokenbench's TPOT, and its percentiles weight each "
        "request by its tokens; its time_per_output_token_ms includes TTFT and is not read.",
    ),
    DefinitionNote(
        figure="itl",
        note="GuideLLM keeps no gap between tokens, only a mean per request, so ITL "
        "percentiles cannot be computed from its rows.",
    ),
    DefinitionNote(
        figure="output_tokens",
        note="GuideLLM's output_tokens come from the server's usage where it used it, "
        "else from its own tokenizer's count of the text; the file does not say which.",
    ),
    DefinitionNote(
        figure="prompt_tokens",
        note="GuideLLM's prompt_tokens come from the server's usage where it used it, "
        "else from its own tokenizer's count of the prompt; the file does not say which.",
    ),
)


def recognises(files: Mapping[str, bytes]) -> bool:
    """Whether these files are GuideLLM's: its report by its default name."""
    return FILE in files


def runs_in(files: Mapping[str, bytes]) -> list[ImportedRun]:
    """The run in ``benchmarks.json``: one stage per benchmark."""
    from analytics.imports.tools import described  # noqa: PLC0415 (tools imports us)

    if FILE not in files:
        raise ImportFormatError(f"no {FILE}: GuideLLM's result file")
    report = need_dict(load_json(files[FILE], FILE), FILE)
    legacy = _layout(report)
    benchmarks = need_list(report.get("benchmarks"), f"{FILE}: benchmarks")
    built = [
        _stage(need_dict(bench, f"{FILE}: benchmarks[{i}]"), i, f"{FILE}: benchmarks[{i}]", legacy)
        for i, bench in enumerate(benchmarks)
    ]
    sampled = any(flag for _, flag in built)
    # Rows that are a sample of a benchmark's requests (GuideLLM's sample_requests) would
    # give wrong counts and rates: such a file imports as the tool's summary only.
    stages = tuple(
        stage.model_copy(update={"requests": ()}) if sampled else stage for stage, _ in built
    )
    metadata = report.get("metadata")
    version = (
        opt_text(metadata.get("guidellm_version"), f"{FILE}: metadata.guidellm_version")
        if metadata
        else None
    )
    model, target = _backend(report, benchmarks, legacy)
    first = min((s.started_at_ns for s in stages if s.started_at_ns is not None), default=None)
    return [
        ImportedRun(
            tool=TOOL,
            tool_version=version,
            format=f"guidellm {FILE} ({'0.2-0.3 layout' if legacy else 'report schema 2'})",
            model=model,
            target=target,
            started_at=None if first is None else dt.datetime.fromtimestamp(first / 1e9, dt.UTC),
            per_request=any(stage.requests for stage in stages),
            stages=stages,
            notes=_NOTES,
            files=(described(FILE, files[FILE]),),
        )
    ]


def _layout(report: Mapping[str, Any]) -> bool:
    """True for the 0.2-0.3 layout, False for report schema 2; refuses anything else."""
    metadata = report.get("metadata")
    if metadata is not None:
        version = need_dict(metadata, f"{FILE}: metadata").get("version")
        if version == _SCHEMA:
            return False
        raise ImportFormatError(
            f"report schema version {version!r} is not one tokenbench reads; expected "
            f"{' or '.join(FORMATS)}",
            f"{FILE}: metadata.version",
        )
    if "args" in report:
        raise ImportFormatError(
            f"GuideLLM 0.4's layout (args at the top, no metadata) is not read; expected "
            f"{' or '.join(FORMATS)}",
            FILE,
        )
    return True


# --- one benchmark --------------------------------------------------------------------


def _stage(
    bench: Mapping[str, Any], index: int, where: str, legacy: bool
) -> tuple[ImportedStage, bool]:
    """One benchmark as a stage, and whether its rows are only a sample of its requests."""
    key = "args" if legacy else "config"
    settings = need_dict(bench.get(key), f"{where}.{key}")
    strategy = need_dict(settings.get("strategy"), f"{where}.{key}.strategy")
    load_kind, label, concurrency, rate = _load(strategy, f"{where}.{key}.strategy")
    start = _instant(bench.get("start_time"), f"{where}.start_time")
    end = _instant(bench.get("end_time"), f"{where}.end_time")
    rows = _requests(need_dict(bench.get("requests"), f"{where}.requests"), where, legacy)
    total = _total(bench, where, legacy)
    stage = ImportedStage(
        index=index,
        label=label,
        load_kind=load_kind,
        concurrency=concurrency,
        rate_per_s=rate,
        started_at_ns=start,
        duration_s=None if start is None or end is None or end < start else (end - start) / 1e9,
        requests=rows,
        summary=figures(need_dict(bench.get("metrics"), f"{where}.metrics"), f"{where}.metrics"),
    )
    return stage, total is not None and len(rows) < total


def _total(bench: Mapping[str, Any], where: str, legacy: bool) -> int | None:
    """How many requests GuideLLM counted in the benchmark (``request_totals.total``:
    in ``metrics`` in schema 2, beside it in the 0.2-0.3 layout)."""
    holder = bench if legacy else need_dict(bench.get("metrics"), f"{where}.metrics")
    at = f"{where}.request_totals" if legacy else f"{where}.metrics.request_totals"
    totals = holder.get("request_totals")
    if totals is None:
        return None
    return opt_count(need_dict(totals, at).get("total"), f"{at}.total")


def _load(
    strategy: Mapping[str, Any], where: str
) -> tuple[LoadKind, str, int | None, float | None]:
    """(load kind, label, concurrency, rate) of a GuideLLM scheduling strategy."""
    kind = opt_text(strategy.get("type_"), f"{where}.type_") or "unknown"
    if kind == "synchronous":
        return "concurrency", "synchronous", 1, None
    if kind == "concurrent":
        streams = opt_count(strategy.get("streams"), f"{where}.streams")
        return "concurrency", f"concurrent {streams}" if streams else "concurrent", streams, None
    if kind == "throughput":
        limit = opt_count(strategy.get("max_concurrency"), f"{where}.max_concurrency")
        return "throughput", "throughput", limit, None
    if kind in ("constant", "poisson"):
        rate = opt_number(strategy.get("rate"), f"{where}.rate")
        if rate is not None and rate < 0:
            raise ImportFormatError(f"a negative rate ({rate})", f"{where}.rate")
        return "rate", f"{kind} {rate:g}/s" if rate is not None else kind, None, rate
    return "unknown", kind, None, None


def _requests(requests: Mapping[str, Any], where: str, legacy: bool) -> tuple[ImportedRequest, ...]:
    rows = []
    for status in _STATUSES:
        items = requests.get(status)
        for i, item in enumerate(need_list(items or [], f"{where}.requests.{status}")):
            at = f"{where}.requests.{status}[{i}]"
            read = _legacy_request if legacy else _request
            rows.append(read(need_dict(item, at), status, at))
    return tuple(rows)


def _request(item: Mapping[str, Any], status: str, where: str) -> ImportedRequest:
    """A request of report schema 2: times in ``info.timings``."""
    info = need_dict(item.get("info"), f"{where}.info")
    timings = need_dict(info.get("timings"), f"{where}.info.timings")
    start = _instant(timings.get("request_start"), f"{where}.info.timings.request_start")
    error = opt_text(info.get("error"), f"{where}.info.error")
    state = opt_text(info.get("status"), f"{where}.info.status")
    return _row(item, status, where, start, error or (state if status != "successful" else None))


def _legacy_request(item: Mapping[str, Any], status: str, where: str) -> ImportedRequest:
    """A request of the 0.2-0.3 layout: ``start_time``, ``error`` at the top."""
    start = _instant(item.get("start_time"), f"{where}.start_time")
    return _row(item, status, where, start, opt_text(item.get("error"), f"{where}.error"))


def _row(
    item: Mapping[str, Any], status: str, where: str, start: int | None, error: str | None
) -> ImportedRequest:
    ok = status == "successful"
    if not ok and error is None:
        error = status  # GuideLLM wrote no message: say which list it was in
    latency = _ms(item.get("request_latency"), f"{where}.request_latency", 1000.0)
    return ImportedRequest(
        ok=ok,
        sent_at_ns=start,
        ttft_ms=_ms(item.get("time_to_first_token_ms"), f"{where}.time_to_first_token_ms", 1.0),
        e2e_ms=latency,
        prompt_tokens=opt_count(item.get("prompt_tokens"), f"{where}.prompt_tokens"),
        output_tokens=opt_count(item.get("output_tokens"), f"{where}.output_tokens"),
        error=None if ok else error,
        request_id=opt_text(item.get("request_id"), f"{where}.request_id"),
    )


def _instant(value: Any, where: str) -> int | None:
    """A time GuideLLM wrote in Unix seconds (``time.time()``), in ns since the epoch."""
    seconds = opt_number(value, where)
    if seconds is None:
        return None
    if not 0 <= seconds < _LAST_SECOND:
        raise ImportFormatError(f"not a time in Unix seconds ({seconds})", where)
    return round(seconds * 1e9)


def _ms(value: Any, where: str, factor: float) -> float | None:
    number = opt_number(value, where)
    if number is None:
        return None
    if number < 0:
        raise ImportFormatError(f"a negative duration ({number})", where)
    return number * factor


def _backend(
    report: Mapping[str, Any], benchmarks: list[Any], legacy: bool
) -> tuple[str, str | None]:
    """(model, target) as the settings name them."""
    if legacy:
        if not benchmarks:
            return "", None
        where = f"{FILE}: benchmarks[0].worker"
        worker = need_dict(need_dict(benchmarks[0], where).get("worker", {}), where)
        model = opt_text(worker.get("backend_model"), f"{where}.backend_model")
        return model or "", opt_text(worker.get("backend_target"), f"{where}.backend_target")
    config = need_dict(report.get("config", {}), f"{FILE}: config")
    spec = need_dict(config.get("spec", {}), f"{FILE}: config.spec")
    backend = need_dict(spec.get("backend", {}), f"{FILE}: config.spec.backend")
    where = f"{FILE}: config.spec.backend"
    model = opt_text(backend.get("model"), f"{where}.model")
    return model or "", opt_text(backend.get("target"), f"{where}.target")
