"""What an importer produces: one run of another tool, in tokenbench's terms.

An importer maps only what the file says. A figure the tool did not record stays
``None`` (stored as NULL), never estimated; a figure the tool defines differently from
tokenbench (docs/metrics.md) is kept as the tool measured it and named in a
``DefinitionNote``, so a comparison can say that a difference is one of method. Times
are milliseconds as floats (the tools' own unit, or converted from theirs), wall-clock
instants are nanoseconds since the Unix epoch.

The models are pydantic so that the child process that parses an untrusted file
(``analytics.imports.child``) hands the parent a validated ``ImportedRun`` as JSON.
"""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "FIGURES",
    "DefinitionNote",
    "ImportedFile",
    "ImportedRequest",
    "ImportedRun",
    "ImportedStage",
    "SummaryFigure",
]

# The figures a definition note or a summary figure may name; the same words as the
# report's columns (docs/metrics.md), so that a comparison can match them.
Figure = Literal[
    "ttft",  # time to first token
    "itl",  # gaps between tokens
    "tpot",  # time per output token after the first
    "e2e",  # request latency
    "prompt_tokens",
    "output_tokens",
    "output_tokens_per_s",  # output tokens per second over the stage
    "requests_per_s",
    "start",  # what a request's time is measured from
    "workload",  # what was sent (lengths, prompts) differs from the named settings
]
FIGURES: tuple[str, ...] = Figure.__args__  # type: ignore[attr-defined]

LoadKind = Literal["concurrency", "rate", "throughput", "sweep", "unknown"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ImportedRequest(_Frozen):
    """One request as the tool recorded it."""

    ok: bool
    # When the tool sent it (wall clock, ns since the epoch); None when the file keeps
    # only relative or monotonic times.
    sent_at_ns: int | None = None
    # When the tool keeps no wall clock per request but a monotonic one: ms after the
    # stage's first request started. With the stage's wall-clock start
    # (ImportedStage.started_at_ns) it places the request in time; without, it stays
    # unplaced (NULL sent_at: no rates from rows, never a guessed clock).
    start_offset_ms: float | None = Field(default=None, ge=0)
    ttft_ms: float | None = None
    e2e_ms: float | None = None
    # Gaps between the token-bearing events after the first, in order.
    itl_ms: tuple[float, ...] | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    error: str | None = None  # the tool's own message of a failed request
    request_id: str | None = None  # the id the tool gave the request (its own, not the server's)
    connection_new: bool | None = None


class SummaryFigure(_Frozen):
    """One figure as the tool printed it (a percentile, a mean, a throughput)."""

    figure: Figure
    stat: str  # p50 | p90 | p95 | p99 | mean | min | max | std | total | rate
    value: float
    unit: str  # ms | tokens | tokens/s | requests/s


class ImportedStage(_Frozen):
    """One load level of the run (a concurrency, a rate, one benchmark of a sweep)."""

    index: int = Field(ge=0)
    label: str  # as the tool named the level ("concurrency 4", "rate 2.0/s", "stage_1")
    load_kind: LoadKind
    concurrency: int | None = Field(default=None, ge=0)
    rate_per_s: float | None = Field(default=None, ge=0)
    started_at_ns: int | None = None
    duration_s: float | None = Field(default=None, ge=0)
    requests: tuple[ImportedRequest, ...] = ()
    summary: tuple[SummaryFigure, ...] = ()


class DefinitionNote(_Frozen):
    """Where the tool's definition of a figure differs from tokenbench's."""

    figure: Figure
    note: str


class ImportedFile(_Frozen):
    """One file of the imported set: its name as given (never used as a path) and the
    SHA-256 of its bytes."""

    name: str
    sha256: str
    size: int


class ImportedRun(_Frozen):
    """A run of another tool. ``per_request`` is true when the file had rows per
    request (then the report computes from them), false when it had only the tool's
    summary figures (then the report shows those, labelled as the tool's)."""

    tool: str  # aiperf | guidellm | vllm-bench | inference-perf | llmd
    tool_version: str | None  # as the file says; None when it does not
    format: str  # the format read, e.g. "aiperf profile_export.jsonl"
    model: str
    target: str | None = None  # the endpoint the tool measured, as the file names it
    started_at: dt.datetime | None = None
    per_request: bool
    stages: tuple[ImportedStage, ...]
    notes: tuple[DefinitionNote, ...] = ()
    files: tuple[ImportedFile, ...] = ()
