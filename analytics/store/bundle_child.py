"""Checking an uploaded run bundle in a child process of bounded memory and time.

``python -m analytics.store.bundle_child``: the parent writes one JSON header line (the
memory cap, the most decoded bytes allowed) and then the bundle's bytes to the child's
stdin. The child caps its memory, writes the bytes to a file of its own private
temporary folder (its name is the child's, never one from the bundle), checks and
migrates the bundle as ``tokenbench import`` does (:func:`analytics.store.bundles.load_bundle`)
and answers one JSON line (``{"ok": true, "run_id", "schema_version", "tables": [...]}``
or ``{"ok": false, "message"}``) followed by each table's rows as an Arrow IPC stream,
each prefixed by its length. Parquet decoding, decompression and migration of an
untrusted file so cost the child; the control plane receives checked Arrow rows, no
more bytes of them than ``decoded_bytes``.
"""

from __future__ import annotations

import json
import struct
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from analytics.store.bundle_manifest import BundleError
from analytics.store.bundles import bundle_rows, load_bundle
from scenarios.child_process import ChildFailed, ask_child, read_request
from scenarios.limits import DATASET_PROCESS_DATA_BYTES, IMPORT_PARSE_TIMEOUT_S

__all__ = ["CheckedBundle", "check_in_child", "is_bundle", "main"]

_LENGTH = struct.Struct(">Q")


@dataclass(frozen=True, slots=True)
class CheckedBundle:
    """A bundle checked and migrated by the child: its run, version and rows."""

    run_id: str
    schema_version: int
    tables: dict[str, pa.Table]


def is_bundle(data: bytes) -> bool:
    """Whether ``data`` looks like a run bundle: a plain tar whose first member is
    ``manifest.json`` (the child checks the rest)."""
    return len(data) >= 512 and data[257:262] == b"ustar" and data[:14] == b"manifest.json\0"


def check_in_child(
    data: bytes, decoded_bytes: int, timeout_s: float = IMPORT_PARSE_TIMEOUT_S
) -> CheckedBundle:
    """The checked rows of the bundle ``data`` (blocking: call it off the event loop);
    BundleError with the child's reason when it is malformed, tampered, newer, or
    decodes to more than ``decoded_bytes``."""
    header = {"memory_bytes": DATASET_PROCESS_DATA_BYTES, "decoded_bytes": decoded_bytes}
    module = "analytics.store.bundle_child"
    try:
        asked = ask_child(module, header, data, timeout_s, "checking the bundle")
    except ChildFailed as exc:
        raise BundleError(exc.reason) from None
    answer, payload = asked.answer, asked.payload
    if not answer.get("ok"):
        raise BundleError(str(answer.get("message")))
    tables: dict[str, pa.Table] = {}
    offset = 0
    for table in answer["tables"]:
        (size,) = _LENGTH.unpack_from(payload, offset)
        offset += _LENGTH.size
        with pa.ipc.open_stream(payload[offset : offset + size]) as reader:
            tables[str(table)] = reader.read_all()
        offset += size
    return CheckedBundle(str(answer["run_id"]), int(answer["schema_version"]), tables)


def _answer(value: dict[str, Any]) -> None:
    sys.stdout.buffer.write(json.dumps(value).encode() + b"\n")


def main() -> int:
    """Child side: check the bundle on stdin, answer on stdout."""
    request, data = read_request(DATASET_PROCESS_DATA_BYTES)
    try:
        with tempfile.TemporaryDirectory(prefix="tokenbench-bundle-") as folder:
            path = Path(folder) / "upload.tbz"
            path.write_bytes(data)
            del data
            loaded = load_bundle(path)
            manifest = loaded.manifest
            tables = bundle_rows(loaded)
    except BundleError as exc:
        _answer({"ok": False, "message": str(exc)})
        return 0
    except MemoryError:
        _answer({"ok": False, "message": "checking the bundle needs more memory than allowed"})
        return 0
    decoded = sum(t.nbytes for t in tables.values())
    if decoded > int(request["decoded_bytes"]):
        message = f"the bundle's rows take {decoded} bytes, more than {request['decoded_bytes']}"
        _answer({"ok": False, "message": message})
        return 0
    _answer(
        {
            "ok": True,
            "run_id": manifest.run_id,
            "schema_version": manifest.schema_version,
            "tables": list(tables),
        }
    )
    out = sys.stdout.buffer
    for rows in tables.values():
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, rows.schema) as writer:
            writer.write_table(rows)
        body = sink.getvalue().to_pybytes()
        out.write(_LENGTH.pack(len(body)) + body)
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
