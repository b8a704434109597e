"""Importer of vllm-bench's result files (docs/import.md). Placeholder: being written."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from analytics.imports.errors import ImportFormatError
from analytics.imports.model import ImportedRun

__all__ = ["FORMATS", "TOOL", "recognises", "runs_in"]

TOOL: Final = "vllm-bench"
FORMATS: Final = ("(being written)",)


def recognises(files: Mapping[str, bytes]) -> bool:
    """Whether these files are vllm-bench's."""
    return False


def runs_in(files: Mapping[str, bytes]) -> list[ImportedRun]:
    """The runs in these files."""
    raise ImportFormatError("not implemented yet")
