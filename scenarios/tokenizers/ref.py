"""Which tokenizer a workload (or a simulated endpoint) counts prompt tokens with.

Exactly one source: a Hugging Face ``hub`` name (resolved from the worker's Hugging Face
cache, or downloaded when the hub is reachable), a local ``path`` (a ``tokenizer.json``
or a directory holding one; read by the local user's ``tokenbench run``/``submit`` only,
which store it as a dataset) or an uploaded ``dataset`` id. A bare string is a hub name.
Over REST a scenario may name a hub name or a dataset, never a path (docs/lengths.md).
"""

from __future__ import annotations

from pydantic import Field, model_validator

from scenarios.base import DATASET_ID_PATTERN, StrictModel
from scenarios.limits import MAX_ID_CHARS

__all__ = ["HUB_NAME_PATTERN", "HUB_REVISION_PATTERN", "TokenizerRef"]

# A Hugging Face repository id: an optional owner and a name of letters, digits, '-',
# '_' and '.', never starting with '.' or '-' (so never a relative or absolute path).
HUB_NAME_PATTERN = r"^(?:[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/)?[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$"
# A Hugging Face revision: a branch, tag (refs/pr/1, v1.2.3) or commit hash. Components
# joined by '/', each of letters, digits, '_' and '-' with single dots inside: never
# '..', a component starting or ending with '.', an empty component, a leading '/' or '-'
# (git refuses those as ref names, and a revision becomes part of a cache path).
HUB_REVISION_PATTERN = (
    r"^[A-Za-z0-9][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)*(?:/[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*)*$"
)


class TokenizerRef(StrictModel):
    """A tokenizer: exactly one of ``hub``, ``path`` and ``dataset``."""

    hub: str | None = Field(
        default=None,
        pattern=HUB_NAME_PATTERN,
        description=(
            "Hugging Face repository id (e.g. meta-llama/Llama-3.1-8B-Instruct): its "
            "tokenizer.json from the worker's Hugging Face cache, else downloaded."
        ),
    )
    revision: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_ID_CHARS,
        pattern=HUB_REVISION_PATTERN,
        description="Branch, tag or commit of the hub repository (default main).",
    )
    path: str | None = Field(
        default=None,
        min_length=1,
        description=(
            "Local tokenizer.json, or a directory holding one (the local user's runs only: "
            "stored as a dataset before the run)."
        ),
    )
    dataset: str | None = Field(
        default=None,
        pattern=DATASET_ID_PATTERN,
        description="Id of an uploaded tokenizer.json (POST /v1/datasets).",
    )

    @model_validator(mode="before")
    @classmethod
    def _hub_shorthand(cls, value: object) -> object:
        return {"hub": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _one_source(self) -> TokenizerRef:
        given = [name for name in ("hub", "path", "dataset") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of hub (a Hugging Face name), path and dataset")
        if self.revision is not None and self.hub is None:
            raise ValueError("revision goes with hub")
        return self

    def describe(self) -> str:
        """How the tokenizer is named, for messages."""
        if self.hub is not None:
            return self.hub + (f"@{self.revision}" if self.revision else "")
        return f"dataset {self.dataset}" if self.dataset is not None else f"file {self.path}"
