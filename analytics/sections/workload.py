"""What the workload sent and how the server counted it: the dataset read, prompt
lengths planned against reported, images, tool calls, and token truth (prompt counts
unknown or counted by the workload's tokenizer, answers shorter than planned)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from analytics.datasets.fingerprint import dataset_line
from analytics.report.token_truth import SHORT_ANSWER_RATIO
from analytics.sections.model import WHERE, Column, Section, SectionOptions
from analytics.sections.registry import section

if TYPE_CHECKING:
    from analytics.report.build import RunReport

Row = Mapping[str, Any]


def _where(row: Row) -> tuple[str, int, str]:
    return row["provider"], row["stage"], row["region"]


@section(order=120)
def dataset(report: RunReport, options: SectionOptions) -> list[Section]:
    """The dataset the run read and how (analytics/datasets/fingerprint.py), if any."""
    if report.dataset is None:
        return []
    return [Section("dataset", "", lines=(dataset_line(report.dataset),))]


PROMPT_LENGTHS = (
    *WHERE,
    Column("planned", "tokens", "tokens", digits=0),
    Column("reported", "tokens", "tokens", digits=0, label="server"),
    Column("error", "change", "%"),
    Column("lengths", optional=True),
    Column("tok/word", "float", digits=2, optional=True, label="tok/\nword"),
    Column("warm-up error", "change", "%", optional=True, label="warm-up\nerror"),
    Column("warm-up n", "int", optional=True, label="n"),
)


@section(order=130)
def prompt_lengths(report: RunReport, options: SectionOptions) -> list[Section]:
    """Per stage row: mean prompt tokens planned and server-reported, the error after
    the warm-up, how lengths were made, and the calibration warm-up's own error."""
    rows = tuple(
        (
            *_where(r), r["prompt_tokens_planned_mean"], r["prompt_tokens_reported_mean"],
            r["prompt_length_error_pct"], r.get("prompt_length_source") or None,
            r.get("prompt_tokens_per_word") if r.get("prompt_length_source") == "calibrated"
            else None,
            r.get("prompt_length_warmup_error_pct"),
            r.get("prompt_warmup_requests")
            if r.get("prompt_length_warmup_error_pct") is not None else None,
        )
        for r in report.stages
        if r.get("prompt_length_error_pct") is not None
    )  # fmt: skip
    if not rows:
        return []
    note = (
        "mean prompt tokens, planned and server-reported; error after the warm-up; lengths: "
        "how they were made, tok/word the calibration's tokens per word; warm-up error over "
        "its n requests (docs/lengths.md)"
    )
    title = "Prompt tokens, planned → server-reported"
    return [Section("prompt-lengths", title, PROMPT_LENGTHS, rows, note)]


IMAGES = (
    *WHERE,
    Column("image requests", "percent", "%", digits=0, label="image\nrequests"),
    Column("images", "float"),
    Column("KiB", "float", "KiB"),
    Column("image tok", "tokens", "tokens", digits=0, label="image\ntok"),
    Column("text tok", "tokens", "tokens", digits=0, label="text\ntok"),
)


@section(order=140)
def images(report: RunReport, options: SectionOptions) -> list[Section]:
    """Per stage row with images: the share of requests with images, images and KiB a
    request, and the image and text prompt tokens where the server reported them apart."""
    rows = tuple(
        (
            *_where(r), r["image_share_pct"], r.get("images_per_request_mean"),
            (r.get("image_bytes_mean") or 0) / 1024, r.get("image_tokens_mean"),
            r.get("text_prompt_tokens_mean"),
        )
        for r in report.stages
        if r.get("image_requests")
    )  # fmt: skip
    if not rows:
        return []
    note = (
        "means over the requests with images; tokens as the server reported them (– where "
        "it did not report them apart; docs/workloads.md)"
    )
    return [Section("images", "Images", IMAGES, rows, note)]


TOOL_CALLS = (
    *WHERE,
    Column("tool requests", "int", label="tool\nrequests"),
    Column("tool call %", "percent", "%", label="tool\ncall %"),
    Column("first call p50 (ms)", "ms", "ms", label="first call\np50 ms"),
)


@section(order=150)
def tool_calls(report: RunReport, options: SectionOptions) -> list[Section]:
    """Per stage row, when some request carried tools: the requests that did, the share
    answered with a tool call and the median ms to the first tool-call delta."""
    if not any("tool_requests" in r for r in report.stages):
        return []
    rows = tuple(
        (*_where(r), r.get("tool_requests"), r.get("tool_call_pct"), r.get("tool_call_p50_ms"))
        for r in report.stages
    )
    note = "tool call %: share of the requests with tools answered with a call (docs/metrics.md)"
    return [Section("tool-calls", "Tool calls", TOOL_CALLS, rows, note)]


def _short(row: Row) -> bool:
    planned, received = row.get("output_tokens_planned_mean"), row.get("output_tokens_mean")
    return planned is not None and received is not None and received < SHORT_ANSWER_RATIO * planned


@section(order=160)
def token_truth(report: RunReport, options: SectionOptions) -> list[Section]:
    """Stages whose prompt counts are unknown, stages counted with the workload's
    tokenizer, and stages whose answers came out shorter than planned (docs/metrics.md,
    "Token counts"); none when every count is the server's and every answer had its
    planned length."""
    out = []
    for field, key, title, note in (
        (
            "prompt_tokens_unknown", "prompt-tokens-unknown", "Prompt tokens unknown",
            "the server sent no usage and the workload has no tokenizer (input tokens, "
            "input tok/s and token-priced cost not shown; docs/metrics.md)",
        ),
        (
            "prompt_tokens_counted", "prompt-tokens-counted",
            "Prompt tokens counted with the workload's tokenizer",
            "the server sent no usage (the text alone, no chat template)",
        ),
    ):  # fmt: skip
        rows = tuple((*_where(r), r[field], r.get("ok", 0)) for r in report.stages if r.get(field))
        if rows:
            columns = (*WHERE, Column(field.rsplit("_", 1)[1], "int"), Column("answers", "int"))
            out.append(Section(key, title, columns, rows, note))
    short = tuple(
        (
            *_where(r), r["output_tokens_planned_mean"], r["output_tokens_mean"],
            r.get("finish_reasons") or "no reason given",
        )
        for r in report.stages
        if _short(r)
    )  # fmt: skip
    if short:
        shorter = (
            *WHERE,
            Column("planned", "tokens", "tokens", digits=0),
            Column("received", "tokens", "tokens"),
            Column("why"),
        )
        note = "mean output tokens planned → received; why: how the answers ended"
        out.append(Section("short-answers", "Answers shorter than planned", shorter, short, note))
    return out
