"""A run bundle's ``manifest.json``: what it says, and how an untrusted one is checked.

The manifest names the bundle's format and version, the tokenbench schema version its
tables were written at, the run, when and by which tokenbench it was written, its
provenance, and each member with its SHA-256 and row count (docs/results-schema.md).
A manifest is untrusted input: bounded in bytes and nesting before it is parsed, its
versions checked before anything else (so a newer format is refused by name, not by a
list of unknown fields), then validated field by field; every error names the field.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = [
    "BUNDLE_FORMAT",
    "BUNDLE_VERSION",
    "MAX_MANIFEST_BYTES",
    "MAX_MANIFEST_DEPTH",
    "BundleError",
    "Manifest",
    "Member",
    "NotABundleError",
    "json_depth",
    "parse_manifest",
]

BUNDLE_FORMAT = "tokenbench-run-bundle"
BUNDLE_VERSION = 1
MAX_MANIFEST_BYTES = 1 << 20
MAX_MANIFEST_DEPTH = 8
_SHA256 = r"^[0-9a-f]{64}$"
_NAME = r"^[a-z_]{1,64}\.parquet$"


class BundleError(ValueError):
    """A bundle that cannot be imported; the message names the member and field."""


class NotABundleError(BundleError):
    """A file that is not a tokenbench bundle at all."""

    def __init__(self, why: str) -> None:
        super().__init__(f"not a tokenbench bundle ({why})")


class Member(BaseModel):
    """One table of the bundle: ``<table>.parquet``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=_NAME, description="Member file name: the table's, .parquet.")
    table: str = Field(pattern=r"^[a-z_]{1,64}$", description="Table the rows belong to.")
    sha256: str = Field(pattern=_SHA256, description="Hex SHA-256 of the member's bytes.")
    rows: int = Field(ge=0, description="Rows in the member.")


class Manifest(BaseModel):
    """The bundle's ``manifest.json``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: str = Field(pattern=f"^{BUNDLE_FORMAT}$", description="Always " + BUNDLE_FORMAT)
    bundle_version: int = Field(ge=1, description="Version of this layout (1).")
    schema_version: int = Field(ge=1, description="tokenbench schema version of the tables.")
    run_id: str = Field(min_length=1, max_length=200, description="The run; every row's run_id.")
    created_at: str = Field(max_length=64, description="When the bundle was written (UTC).")
    tokenbench_version: str = Field(max_length=64, description="Version that wrote it.")
    provenance: dict[str, str | None] = Field(
        max_length=32, description="Where the run came from (tool, its version, the run's name)."
    )
    members: list[Member] = Field(max_length=64, description="One per table.")


def json_depth(text: str) -> int:
    """The deepest nesting of objects and arrays in JSON ``text`` (strings skipped), read
    without parsing, so a deeply nested document is refused before the parser recurses."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def _field_errors(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in error['loc']) or '(top)'}: {error['msg']}"
        for error in exc.errors()[:5]
    )


def parse_manifest(raw: bytes, schema_version: int) -> Manifest:
    """The manifest in ``raw``, checked: a bundle's format, a version this tokenbench
    reads, a schema no newer than ``schema_version``, every field valid."""
    if len(raw) > MAX_MANIFEST_BYTES:
        raise BundleError(f"manifest.json: larger than {MAX_MANIFEST_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BundleError("manifest.json: not UTF-8") from None
    if json_depth(text) > MAX_MANIFEST_DEPTH:
        raise BundleError(f"manifest.json: nested deeper than {MAX_MANIFEST_DEPTH} levels")
    try:
        data: Any = json.loads(text)
    except ValueError as exc:
        raise BundleError(f"manifest.json: not JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != BUNDLE_FORMAT:
        raise NotABundleError(f"manifest.json has no format {BUNDLE_FORMAT!r}")
    version = data.get("bundle_version")
    if version != BUNDLE_VERSION:
        raise BundleError(
            f"manifest.json: bundle_version {version!r} is not one this tokenbench reads "
            f"({BUNDLE_VERSION}): import it with the tokenbench that wrote it"
        )
    schema = data.get("schema_version")
    if isinstance(schema, int) and schema > schema_version:
        raise BundleError(
            f"manifest.json: schema_version {schema} is newer than this tokenbench's "
            f"(v{schema_version}): upgrade tokenbench to import it"
        )
    try:
        manifest = Manifest.model_validate(data)
    except ValidationError as exc:
        raise BundleError(f"manifest.json: {_field_errors(exc)}") from None
    names = [m.name for m in manifest.members]
    if len(set(names)) != len(names):
        raise BundleError("manifest.json: members: a member is listed twice")
    for index, member in enumerate(manifest.members):
        if member.name != f"{member.table}.parquet":
            raise BundleError(
                f"manifest.json: members.{index}.name: {member.name!r} is not "
                f"{member.table}.parquet"
            )
    if not re.fullmatch(r"[\x21-\x7e]+", manifest.run_id):
        raise BundleError("manifest.json: run_id: printable ASCII without spaces")
    return manifest
