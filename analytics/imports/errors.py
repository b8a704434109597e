"""The one error an importer raises: the file is not what it claims, said with where."""

from __future__ import annotations

__all__ = ["ImportFormatError", "NotRecognised"]


class ImportFormatError(ValueError):
    """A result file that cannot be imported: ``reason`` says why, ``where`` names the
    file and the line or field (``c1/profile_export.jsonl line 3``,
    ``benchmarks.json: benchmarks[0].metrics``) so the user can find it."""

    def __init__(self, reason: str, where: str | None = None) -> None:
        super().__init__(f"{where}: {reason}" if where else reason)
        self.reason = reason
        self.where = where


class NotRecognised(ImportFormatError):
    """No file of the set is a result of the tool asked for (or of any tool, for
    ``--tool auto``): a folder of other files is skipped, not refused."""
