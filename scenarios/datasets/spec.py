"""``workload.dataset``: requests drawn from a dataset of real prompts (docs/workloads.md).

The file is exactly one of a local ``path`` (the local user's ``tokenbench run`` and
``submit`` read it), a Hugging Face ``hub`` dataset (resolved by the same commands from
the local Hugging Face cache, downloaded only when not cached and the hub is reachable),
or an uploaded ``dataset`` id (``POST /v1/datasets``; the only form a control plane
accepts over REST). ``format`` and ``columns`` say how a file becomes prompt entries;
they are applied where the file is read, once, so they go with ``path`` and ``hub``
(an upload takes them as query parameters). ``filters`` and ``sample`` choose which rows
the requests use; they are applied when requests are planned, with the workload's
tokenizer when it has one (``scenarios.dataset_rows``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from scenarios.base import DATASET_ID_PATTERN, StrictModel
from scenarios.limits import MAX_ID_CHARS, MAX_TOKENS
from scenarios.tokenizers.ref import HUB_NAME_PATTERN, HUB_REVISION_PATTERN

__all__ = [
    "COLUMN_NAME_PATTERN",
    "DatasetColumns",
    "DatasetFormat",
    "DatasetWorkload",
    "LengthFilters",
]

DatasetFormat = Literal["auto", "jsonl", "json", "csv", "parquet", "arrow"]

# Column names as written in the file: printable, no control characters.
COLUMN_NAME_PATTERN = r"^[^\x00-\x1f\x7f]+$"
_SPLIT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


def _column(description: str) -> str | None:
    return Field(
        default=None,
        min_length=1,
        max_length=MAX_ID_CHARS,
        pattern=COLUMN_NAME_PATTERN,
        description=description,
    )


class DatasetColumns(StrictModel):
    """Which columns (or JSON keys) hold what, for files whose names are not the usual
    ones (``conversations``, ``messages``, ``prompt``, ``completion``, ``max_tokens``)."""

    prompt: str | None = _column("Text of the user's prompt (one user message).")
    messages: str | None = _column(
        "A conversation: OpenAI messages [{role, content}] or ShareGPT turns [{from, value}]."
    )
    answer: str | None = _column("Text of the reference answer; its length is the output length.")
    output_tokens: str | None = _column("Answer length in tokens (an integer column).")

    @model_validator(mode="after")
    def _one_prompt(self) -> DatasetColumns:
        if self.prompt is not None and self.messages is not None:
            raise ValueError("give prompt (a text column) or messages (a conversation), not both")
        return self

    def mapping(self) -> dict[str, str]:
        """The given columns, ``{role: column}``."""
        return {k: v for k, v in self.model_dump().items() if v is not None}


def _tokens(description: str) -> int | None:
    return Field(default=None, ge=1, le=MAX_TOKENS, description=description)


class LengthFilters(StrictModel):
    """Rows kept by length, in tokens, inclusive: counted with ``workload.tokenizer``
    when given, else estimated at 4 characters a token."""

    min_prompt_tokens: int | None = _tokens("Drop rows whose prompt is shorter.")
    max_prompt_tokens: int | None = _tokens("Drop rows whose prompt is longer.")
    min_output_tokens: int | None = _tokens(
        "Drop rows whose answer is shorter (and rows without an answer length)."
    )
    max_output_tokens: int | None = _tokens(
        "Drop rows whose answer is longer (and rows without an answer length)."
    )

    @model_validator(mode="after")
    def _ordered(self) -> LengthFilters:
        for what in ("prompt", "output"):
            low = getattr(self, f"min_{what}_tokens")
            high = getattr(self, f"max_{what}_tokens")
            if low is not None and high is not None and low > high:
                raise ValueError(f"min_{what}_tokens ({low}) must not exceed max_{what}_tokens")
        return self

    @property
    def on_output(self) -> bool:
        """Whether a row needs an answer length to pass."""
        return self.min_output_tokens is not None or self.max_output_tokens is not None


class DatasetWorkload(StrictModel):
    """Requests whose prompts (and answer lengths) come from a dataset's rows."""

    path: str | None = Field(
        default=None,
        min_length=1,
        description=(
            "Local file (ShareGPT JSON, JSONL, CSV, Parquet, Arrow) or a directory of them "
            "(e.g. Dataset.save_to_disk); the local user's runs only."
        ),
    )
    hub: str | None = Field(
        default=None,
        pattern=HUB_NAME_PATTERN,
        description=(
            "Hugging Face dataset repository (owner/name): its data files from the local "
            "Hugging Face cache, downloaded only when not cached and the hub is reachable."
        ),
    )
    revision: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_ID_CHARS,
        pattern=HUB_REVISION_PATTERN,
        description="Branch, tag or commit of the hub repository (default main).",
    )
    split: str | None = Field(
        default=None,
        pattern=_SPLIT_PATTERN,
        description="Hub data files of this split only (file names containing it, e.g. train).",
    )
    dataset: str | None = Field(
        default=None,
        pattern=DATASET_ID_PATTERN,
        description="Id of an uploaded dataset (POST /v1/datasets answers it).",
    )
    format: DatasetFormat = Field(
        default="auto",
        description="File format; auto: from the file's first bytes (and a .csv name).",
    )
    columns: DatasetColumns | None = Field(
        default=None, description="Columns holding prompt, conversation, answer, output length."
    )
    filters: LengthFilters = Field(
        default_factory=LengthFilters, description="Rows kept by prompt and answer length."
    )
    sample: Literal["dataset", "mix"] = Field(
        default="dataset",
        description=(
            "dataset: rows in a seeded shuffle (the dataset's own length distribution); "
            "mix: for each request the row whose prompt length is nearest the mix's draw."
        ),
    )
    replacement: bool = Field(
        default=False,
        description=(
            "sample: dataset only. false: every kept row once before any repeats; "
            "true: each request an independent seeded draw."
        ),
    )

    @model_validator(mode="after")
    def _one_source(self) -> DatasetWorkload:
        given = [name for name in ("path", "hub", "dataset") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of path (a local file), hub and dataset (an id)")
        if (self.revision is not None or self.split is not None) and self.hub is None:
            raise ValueError("revision and split go with hub")
        if self.dataset is not None and (self.columns is not None or self.format != "auto"):
            raise ValueError(
                "format and columns apply when a file is converted: an uploaded dataset was "
                "converted when it was uploaded (POST /v1/datasets?prompt_column=...)"
            )
        if self.replacement and self.sample != "dataset":
            raise ValueError("replacement goes with sample: dataset")
        return self

    def describe(self) -> str:
        """Where the rows come from, for messages."""
        if self.hub is not None:
            return f"hub dataset {self.hub}" + (f"@{self.revision}" if self.revision else "")
        return f"dataset {self.dataset}" if self.dataset is not None else f"file {self.path}"
