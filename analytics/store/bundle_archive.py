"""A run bundle's file: a plain (uncompressed) POSIX tar of ``manifest.json`` first, then
one Parquet file per table (zstd inside Parquet, so the tar itself is not compressed).

Reading treats the file as hostile: its size is bounded before it is opened; it must be
a tar whose first member is ``manifest.json``; members are read into memory, never
written to disk, and no member name is ever used as a path: a name must be one of the
expected names exactly (``manifest.json``, ``<table>.parquet`` of a bundled table), so
absolute paths, ``..``, directories, links and devices are refused by name or type; the
member count and each member's size are bounded; a member named twice is refused.
"""

from __future__ import annotations

import io
import tarfile
from dataclasses import dataclass
from pathlib import Path

from analytics.store.bundle_manifest import MAX_MANIFEST_BYTES, BundleError, NotABundleError
from analytics.store.bundle_tables import BUNDLE_TABLES

__all__ = [
    "MANIFEST",
    "MAX_BUNDLE_BYTES",
    "MAX_MEMBERS",
    "BundleFiles",
    "member_names",
    "read_archive",
    "write_archive",
]

MANIFEST = "manifest.json"
MAX_BUNDLE_BYTES = 4 << 30  # 4 GiB: a run of tens of millions of requests
MAX_MEMBERS = len(BUNDLE_TABLES) + 1


def member_names() -> frozenset[str]:
    """Every name a bundle's member may have."""
    return frozenset({MANIFEST, *(f"{table}.parquet" for table in BUNDLE_TABLES)})


@dataclass(frozen=True, slots=True)
class BundleFiles:
    """A bundle's members, read into memory: the manifest's bytes and each table's."""

    manifest: bytes
    tables: dict[str, bytes]  # member name -> bytes


def write_archive(path: Path, manifest: bytes, tables: dict[str, bytes]) -> None:
    """Write the bundle to ``path`` (through a temporary file renamed into place, so a
    failed export leaves no half bundle); members have fixed names and no owner."""
    partial = path.with_name(path.name + ".partial")
    try:
        with tarfile.open(partial, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for name, data in ((MANIFEST, manifest), *tables.items()):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                info.mode = 0o644
                tar.addfile(info, io.BytesIO(data))
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)


def _check_member(
    member: tarfile.TarInfo, count: int, seen: set[str], size: int, max_bytes: int
) -> None:
    """Refuse a member by its place, name, type or size (before reading it)."""
    name = member.name
    if count == 1 and name != MANIFEST:
        raise NotABundleError(f"its first member is {name[:80]!r}, not {MANIFEST}")
    if count > MAX_MEMBERS:
        raise BundleError(f"more than {MAX_MEMBERS} members")
    if name not in member_names():
        raise BundleError(f"member {name[:80]!r}: not a member a bundle may have")
    if not member.isreg():
        raise BundleError(f"member {name}: not a regular file (a link, directory or device)")
    if name in seen:
        raise BundleError(f"member {name}: present twice")
    limit = MAX_MANIFEST_BYTES if name == MANIFEST else max_bytes
    if member.size > min(limit, size):
        raise BundleError(f"member {name}: {member.size} bytes, more than allowed")


def _read_member(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    body = tar.extractfile(member)
    if body is None:  # pragma: no cover - regular files always have a body
        raise BundleError(f"member {member.name}: unreadable")
    try:
        data = body.read(member.size)
    except (OSError, tarfile.TarError) as exc:
        raise BundleError(f"member {member.name}: truncated ({exc})") from None
    if len(data) != member.size:
        raise BundleError(f"member {member.name}: truncated")
    return data


def read_archive(path: Path, max_bytes: int | None = None) -> BundleFiles:
    """The members of the bundle at ``path``, checked as the module's doc says; at most
    ``max_bytes`` (default :data:`MAX_BUNDLE_BYTES`)."""
    max_bytes = MAX_BUNDLE_BYTES if max_bytes is None else max_bytes
    size = path.stat().st_size
    if size > max_bytes:
        raise BundleError(f"{size} bytes, more than a bundle may hold ({max_bytes})")
    members: dict[str, bytes] = {}
    with path.open("rb") as raw:
        try:
            tar = tarfile.open(fileobj=raw, mode="r:")  # noqa: SIM115 - closed below
        except tarfile.TarError:
            raise NotABundleError("not a tar archive") from None
        with tar:
            while True:
                try:
                    member = tar.next()
                except tarfile.TarError as exc:
                    raise BundleError(f"a damaged tar member ({exc})") from None
                if member is None:
                    break
                _check_member(member, len(members) + 1, set(members), size, max_bytes)
                members[member.name] = _read_member(tar, member)
    manifest = members.pop(MANIFEST, None)
    if manifest is None:
        raise NotABundleError(f"no {MANIFEST}")
    return BundleFiles(manifest, members)
