"""The files of an import, grouped into sets: one folder's files, by base name.

An import is a list of (relative path, bytes) entries, from a directory walked by the
command line or from a tar archive uploaded over REST. The path only groups the files
(each folder's files are one set, read by the tool's importer) and names them in
messages; it is never used as a path. A tar archive is read in memory, regular files
only, each member's size checked against what is left of ``MAX_IMPORT_BYTES`` before it
is read.
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass

from analytics.imports.errors import ImportFormatError
from scenarios.limits import MAX_IMPORT_BYTES, MAX_IMPORT_FILES

__all__ = ["FileSet", "grouped", "is_tar", "tar_entries"]


@dataclass(frozen=True, slots=True)
class FileSet:
    """One folder's files: ``folder`` as given ('' for the top), files by base name."""

    folder: str
    files: dict[str, bytes]

    def label(self, name: str) -> str:
        """A file's name as messages show it."""
        return f"{self.folder}/{name}" if self.folder else name


def grouped(entries: Iterable[tuple[str, bytes]]) -> list[FileSet]:
    """Entries grouped by folder, in the order folders first appear; bounded in count
    and bytes (ImportFormatError beyond)."""
    sets: dict[str, dict[str, bytes]] = {}
    size = 0
    for count, (path, data) in enumerate(entries, start=1):
        size += len(data)
        if count > MAX_IMPORT_FILES:
            raise ImportFormatError(f"more than {MAX_IMPORT_FILES} files in one import")
        if size > MAX_IMPORT_BYTES:
            raise ImportFormatError(f"more than {MAX_IMPORT_BYTES} bytes in one import")
        parts = [p for p in path.replace("\\", "/").split("/") if p not in ("", ".")]
        if not parts:
            raise ImportFormatError("a file without a name")
        sets.setdefault("/".join(parts[:-1]), {})[parts[-1]] = data
    return [FileSet(folder, files) for folder, files in sets.items()]


def is_tar(data: bytes) -> bool:
    """Whether ``data`` is a tar archive (plain or gzip-compressed)."""
    if data[:2] == b"\x1f\x8b":
        return True
    return len(data) >= 262 and data[257:262] == b"ustar"


def tar_entries(data: bytes) -> list[tuple[str, bytes]]:
    """The regular files of a tar archive, in memory; links, devices and directories are
    skipped, sizes bounded. ImportFormatError for a broken archive."""
    entries: list[tuple[str, bytes]] = []
    left = MAX_IMPORT_BYTES
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
            for member in tar:
                if not member.isreg():
                    continue
                if len(entries) >= MAX_IMPORT_FILES:
                    raise ImportFormatError(f"more than {MAX_IMPORT_FILES} files in the archive")
                if member.size > left:
                    raise ImportFormatError(f"more than {MAX_IMPORT_BYTES} bytes in the archive")
                stream = tar.extractfile(member)
                content = b"" if stream is None else stream.read(member.size)
                left -= len(content)
                entries.append((member.name, content))
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise ImportFormatError(f"not a readable tar archive ({exc})") from None
    return entries
