"""Importer of vLLM's serving benchmark results (docs/import.md).

``vllm bench serve --save-result`` writes one JSON object per run: the run's settings, its
totals and the ``{mean,median,std,pNN}_{ttft,tpot,itl,e2el}_ms`` figures it printed; with
``--save-detailed`` also lists indexed by request (``ttfts``, ``itls``, ``latencies``,
``input_lens``, ``output_lens``, ``errors``). One file is one run of one stage; a folder of
several is several runs; ``--append-result`` puts one object a line. vLLM's older
benchmark_serving.py script wrote the same keys less ``latencies`` and ``failed``. No file
names the vLLM version that wrote it, so the format is recognised by its keys.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from analytics.imports.errors import ImportFormatError
from analytics.imports.jsonfile import (
    iter_jsonl,
    load_json,
    need_dict,
    need_list,
    need_number,
    opt_number,
    opt_text,
)
from analytics.imports.model import (
    DefinitionNote,
    Figure,
    ImportedFile,
    ImportedRequest,
    ImportedRun,
    ImportedStage,
    LoadKind,
    SummaryFigure,
)

__all__ = ["FORMATS", "TOOL", "recognises", "runs_in"]

TOOL: Final = "vllm-bench"
SERVE: Final = "vllm bench serve --save-result JSON"
LEGACY: Final = "benchmark_serving.py --save-result JSON"
FORMATS: Final = (f"{SERVE} (read from vLLM 0.30.0; the file names no version)", LEGACY)

# Every result of either format has these; a file without them is not one.
_REQUIRED: Final = (
    "date",
    "model_id",
    "num_prompts",
    "request_rate",
    "duration",
    "completed",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "output_throughput",
)
_MARKERS: Final = (b'"num_prompts"', b'"model_id"', b'"request_throughput"', b'"date"')
_PERCENTILE_KEY: Final = re.compile(r"(mean|median|std|p\d+(?:\.\d+)?)_(ttft|tpot|itl|e2el)_ms")
_COLUMNS: Final = ("itls", "latencies", "input_lens", "output_lens", "errors")
_FIGURE: Final[dict[str, Figure]] = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2el": "e2e"}
_TOTALS: Final[tuple[tuple[str, Figure, str, str], ...]] = (  # key, figure, stat, unit
    ("total_input_tokens", "prompt_tokens", "total", "tokens"),
    ("total_output_tokens", "output_tokens", "total", "tokens"),
    ("request_throughput", "requests_per_s", "rate", "requests/s"),
    ("output_throughput", "output_tokens_per_s", "rate", "tokens/s"),
    ("max_output_tokens_per_s", "output_tokens_per_s", "max", "tokens/s"),
)

_SERVE_NOTES: Final[dict[Figure, str]] = {
    "ttft": (
        "vLLM's ttfts end at the first streamed event that has choices, even a role-only "
        "event with no text (OpenAI and vLLM send one first), so its TTFT can be the time to "
        "the first event rather than to the first token."
    ),
    "itl": (
        "vLLM's itls are the gaps between every streamed event after that first one, so they "
        "include the wait from a role-only first event to the first token and the gap to the "
        "last event that carries only the finish reason."
    ),
    "tpot": (
        "vLLM's TPOT is (latency - its TTFT) / (output tokens - 1) per request, so it "
        "includes the wait for the first token when the first event was role-only."
    ),
    "e2e": (
        "vLLM's latencies end at the last streamed event with choices (its TTFT plus all its "
        "itls), before the usage event and [DONE], not at the end of the stream."
    ),
    "output_tokens": (
        "vLLM's output_lens are the server's usage.completion_tokens when the stream reports "
        "usage, else the answer text re-tokenized with vLLM's tokenizer."
    ),
    "prompt_tokens": (
        "vLLM's input_lens are the server's usage.prompt_tokens when reported, else the "
        "prompt length its dataset planned."
    ),
}
_LEGACY_NOTES: Final[dict[Figure, str]] = {
    "ttft": (
        "benchmark_serving.py's ttfts end at the first streamed chunk it counted as a token; "
        "which chunk counts (the first with text, or the first event) changed between vLLM "
        "versions, and the file does not say which version wrote it."
    ),
    "itl": (
        "benchmark_serving.py's itls are gaps between the chunks it counted, each timed from "
        "the event before it; like its TTFT the rule changed between vLLM versions."
    ),
    "tpot": (
        "benchmark_serving.py's TPOT is (latency - its TTFT) / (output tokens - 1) per "
        "request, with its own TTFT."
    ),
    "output_tokens": (
        "benchmark_serving.py's output_lens are the server's usage count where it read one, "
        "else the answer text re-tokenized with its tokenizer."
    ),
    "prompt_tokens": (
        "benchmark_serving.py's input_lens are the prompt lengths its dataset planned, not a "
        "count of what was sent."
    ),
}


def recognises(files: Mapping[str, bytes]) -> bool:
    """Whether some JSON file here has the keys of a vLLM serving benchmark result."""
    return any(
        _is_result_name(name) and all(marker in data for marker in _MARKERS)
        for name, data in files.items()
    )


def runs_in(files: Mapping[str, bytes]) -> list[ImportedRun]:
    """One run per result: a file, or each line of an ``--append-result`` file."""
    from analytics.imports.tools import described  # noqa: PLC0415 - tools imports this module

    runs: list[ImportedRun] = []
    for name in sorted(files):
        if not _is_result_name(name):
            continue
        data = files[name]
        for where, document in _documents(data, name):
            runs.append(_run(need_dict(document, where), where, described(name, data)))
    return runs


def _is_result_name(name: str) -> bool:
    # vLLM writes <result>.pytorch.json beside a result when asked: another format.
    return name.endswith(".json") and not name.endswith(".pytorch.json")


def _documents(data: bytes, name: str) -> list[tuple[str, Any]]:
    """The result objects of a file: the whole file, or one a line (``--append-result``)."""
    try:
        return [(name, load_json(data, name))]
    except ImportFormatError:
        lines = data.splitlines()
        first = lines[0] if lines else b""
        if len(lines) < 2 or not _parses(first, name):
            raise  # not several documents: the whole file's error says where
    return [(f"{name} line {number}", doc) for number, doc in iter_jsonl(data, name)]


def _parses(line: bytes, name: str) -> bool:
    try:
        load_json(line, name)
    except ImportFormatError:
        return False
    return True


def _run(doc: Mapping[str, Any], where: str, file: ImportedFile) -> ImportedRun:
    missing = [key for key in _REQUIRED if key not in doc]
    if missing:
        raise ImportFormatError(
            f"not a vLLM serving benchmark result: no {', '.join(missing)}; expected "
            f"{' or '.join(FORMATS)} with the keys {', '.join(_REQUIRED)}",
            where,
        )
    legacy = "failed" not in doc and "latencies" not in doc
    model = opt_text(doc["model_id"], f"{where}: model_id")
    if model is None:
        raise ImportFormatError("expected the model's name, found nothing", f"{where}: model_id")
    stage = _stage(doc, where)
    return ImportedRun(
        tool=TOOL,
        tool_version=None,  # neither format records the vLLM version
        format=LEGACY if legacy else SERVE,
        model=model,
        # ``date`` is the local time the file was saved, in no stated zone: not a start.
        started_at=None,
        per_request="ttfts" in doc,
        stages=(stage,),
        notes=tuple(
            DefinitionNote(figure=figure, note=note)
            for figure, note in (_LEGACY_NOTES if legacy else _SERVE_NOTES).items()
        ),
        files=(file,),
    )


def _stage(doc: Mapping[str, Any], where: str) -> ImportedStage:
    rate = _rate(doc["request_rate"], f"{where}: request_rate")
    concurrency = _count(doc.get("max_concurrency"), f"{where}: max_concurrency")
    kind: LoadKind
    if doc.get("ramp_up_strategy") is not None:
        kind, label = "sweep", f"ramp-up {opt_text(doc['ramp_up_strategy'], where)}"
    elif rate is not None:
        kind, label = "rate", f"rate {rate:g}/s"
    elif concurrency is not None:
        kind, label = "concurrency", f"concurrency {concurrency}"
    else:
        kind, label = "throughput", "all requests at once"
    if kind != "concurrency" and concurrency is not None:
        label += f", concurrency {concurrency}"
    return ImportedStage(
        index=0,
        label=label,
        load_kind=kind,
        concurrency=concurrency,
        rate_per_s=rate,
        duration_s=_non_negative(doc["duration"], f"{where}: duration"),
        requests=_requests(doc, where) if "ttfts" in doc else (),
        summary=_summary(doc, where),
    )


def _non_negative(value: Any, where: str) -> float:
    number = need_number(value, where)
    if number < 0:
        raise ImportFormatError(f"expected a number >= 0, found {number:g}", where)
    return number


def _count(value: Any, where: str) -> int | None:
    """A whole number >= 0, or None."""
    number = opt_number(value, where)
    if number is None:
        return None
    if number < 0 or number != int(number):
        raise ImportFormatError(f"expected a whole number >= 0, found {number:g}", where)
    return int(number)


def _rate(value: Any, where: str) -> float | None:
    """``request_rate``: a number, or ``"inf"`` for no rate (None)."""
    if value == "inf":
        return None
    return _non_negative(value, where)


def _summary(doc: Mapping[str, Any], where: str) -> tuple[SummaryFigure, ...]:
    figures: list[SummaryFigure] = []
    for key, figure, stat, unit in _TOTALS:
        value = opt_number(doc.get(key), f"{where}: {key}")
        if value is not None:
            figures.append(SummaryFigure(figure=figure, stat=stat, value=value, unit=unit))
    for key, raw in doc.items():
        match = _PERCENTILE_KEY.fullmatch(key)
        if match is None:
            continue
        stat, name = match.groups()
        if stat == "median" and f"p50_{name}_ms" in doc:
            continue  # the same figure twice: vLLM writes both when asked for p50
        value = opt_number(raw, f"{where}: {key}")
        if value is not None:
            figures.append(
                SummaryFigure(
                    figure=_FIGURE[name],
                    stat="p50" if stat == "median" else stat,
                    value=value,
                    unit="ms",
                )
            )
    return tuple(figures)


def _column(doc: Mapping[str, Any], key: str, count: int, where: str) -> list[Any] | None:
    """A per-request list, as long as ``ttfts``; None when the format has none."""
    if key not in doc:
        return None
    values = need_list(doc[key], f"{where}: {key}")
    if len(values) != count:
        raise ImportFormatError(
            f"{len(values)} entries for the {count} requests of ttfts", f"{where}: {key}"
        )
    return values


def _requests(doc: Mapping[str, Any], where: str) -> tuple[ImportedRequest, ...]:
    ttfts = need_list(doc["ttfts"], f"{where}: ttfts")
    count = len(ttfts)
    columns = {key: _column(doc, key, count, where) for key in _COLUMNS}
    columns["ttfts"] = ttfts
    itls, errors = columns["itls"], columns["errors"]
    if itls is None or errors is None:
        raise ImportFormatError("ttfts without itls and errors: a cut --save-detailed list", where)
    legacy = columns["latencies"] is None
    return tuple(_request(columns, itls, i, legacy, where) for i in range(count))


def _request(
    columns: Mapping[str, list[Any] | None], itls: list[Any], i: int, legacy: bool, where: str
) -> ImportedRequest:
    def value(key: str) -> Any:
        values = columns[key]
        return None if values is None else values[i]

    error = opt_text(value("errors"), f"{where}: errors[{i}]")
    ttft = opt_number(value("ttfts"), f"{where}: ttfts[{i}]")
    latency = opt_number(value("latencies"), f"{where}: latencies[{i}]")
    output = _count(value("output_lens"), f"{where}: output_lens[{i}]")
    prompt = _count(value("input_lens"), f"{where}: input_lens[{i}]")
    # vLLM saves no success flag: a failed request has its error text, or, when the server
    # gave no reason, the zero latency (older format: zero TTFT and length) it leaves unset.
    timed = bool(ttft) or bool(output) if legacy else bool(latency)
    if error is not None or not timed:
        return ImportedRequest(
            ok=False, prompt_tokens=prompt, error=error or "failed (vLLM saved no reason)"
        )
    gaps = need_list(itls[i], f"{where}: itls[{i}]")
    return ImportedRequest(
        ok=True,
        ttft_ms=ttft * 1000 if ttft else None,  # 0: no token event was seen
        e2e_ms=None if latency is None else latency * 1000,
        itl_ms=tuple(
            need_number(gap, f"{where}: itls[{i}][{j}]") * 1000 for j, gap in enumerate(gaps)
        ),
        prompt_tokens=prompt,
        output_tokens=output,
    )
