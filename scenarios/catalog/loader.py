"""Load the shipped catalogs and an optional user file that adds or overrides entries.

A catalog file is a YAML (or JSON) mapping with any of the sections ``hardware``,
``models``, ``quantization`` and ``kv_dtypes``, each a list of entries with an ``id``.
The shipped files are read first, then the user's. A user entry whose id is new must be
complete; one whose id exists is laid over the shipped entry field by field, so
``{id: h100, gpu_hour_usd: 2.1, price_date: 2026-01-05, price_source: my contract}``
changes only the price. Every problem is reported with its file and field path.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import ValidationError

from scenarios.catalog.models import CatalogEntry, Hardware, KvDtype, Model, Quantization
from scenarios.errors import BadInput, NotFound

SHIPPED_FILES = ("hardware.yaml", "models.yaml", "quantization.yaml")
SECTIONS: dict[str, type[CatalogEntry]] = {
    "hardware": Hardware,
    "models": Model,
    "quantization": Quantization,
    "kv_dtypes": KvDtype,
}
# Fields that only mean something together: overriding the price drops the shipped
# provenance, so a new price never carries an old date and source.
_PRICE_FIELDS = ("gpu_hour_usd", "price_date", "price_source")

EntryT = TypeVar("EntryT", bound=CatalogEntry)


class CatalogError(BadInput, ValueError):
    """A catalog file that cannot be used; ``problems`` lists each reason."""

    def __init__(self, problems: list[str], source: str) -> None:
        self.problems = problems
        self.source = source
        super().__init__("\n".join(f"{source}: {problem}" for problem in problems))


class UnknownIdError(NotFound, LookupError):
    """An id that is not in the catalog; the message lists the valid ones."""

    def __init__(self, section: str, entry_id: str, valid: list[str]) -> None:
        self.section = section
        self.entry_id = entry_id
        self.valid = valid
        super().__init__(f"unknown {section} id {entry_id!r}; valid ids: {', '.join(valid)}")


@dataclass(frozen=True)
class Catalog:
    """Every known entry, by id, in file order (shipped first, then the user's)."""

    hardware: Mapping[str, Hardware]
    models: Mapping[str, Model]
    quantization: Mapping[str, Quantization]
    kv_dtypes: Mapping[str, KvDtype]

    def get_hardware(self, entry_id: str) -> Hardware:
        """The hardware entry ``entry_id`` (case-insensitive) or UnknownIdError."""
        return _lookup(self.hardware, "hardware", entry_id)

    def get_model(self, entry_id: str) -> Model:
        """The model entry ``entry_id`` (case-insensitive) or UnknownIdError."""
        return _lookup(self.models, "model", entry_id)

    def get_quantization(self, entry_id: str) -> Quantization:
        """The weight format ``entry_id`` (case-insensitive) or UnknownIdError."""
        return _lookup(self.quantization, "quantization", entry_id)

    def get_kv_dtype(self, entry_id: str) -> KvDtype:
        """The KV-cache dtype ``entry_id`` (case-insensitive) or UnknownIdError."""
        return _lookup(self.kv_dtypes, "KV dtype", entry_id)


def _lookup(entries: Mapping[str, EntryT], section: str, entry_id: str) -> EntryT:
    entry = entries.get(entry_id.strip().lower())
    if entry is None:
        raise UnknownIdError(section, entry_id, list(entries))
    return entry


def load_catalog(user_file: str | Path | None = None) -> Catalog:
    """The shipped catalogs, extended and overridden by ``user_file`` if given."""
    entries: dict[str, dict[str, CatalogEntry]] = {section: {} for section in SECTIONS}
    package = resources.files(__package__ or "scenarios.catalog")
    for name in SHIPPED_FILES:
        text = package.joinpath(name).read_text(encoding="utf-8")
        _merge(entries, _parse(text, name), name, allow_override=False)
    if user_file is not None:
        path = Path(user_file)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise CatalogError([f"cannot read file: {exc.strerror}"], str(path)) from None
        _merge(entries, _parse(text, str(path)), str(path), allow_override=True)
    return Catalog(
        hardware=_only(entries["hardware"], Hardware),
        models=_only(entries["models"], Model),
        quantization=_only(entries["quantization"], Quantization),
        kv_dtypes=_only(entries["kv_dtypes"], KvDtype),
    )


def _only(entries: Mapping[str, CatalogEntry], kind: type[EntryT]) -> dict[str, EntryT]:
    # Each section holds only its own class (see SECTIONS): this filters nothing, it types.
    return {key: entry for key, entry in entries.items() if isinstance(entry, kind)}


@functools.cache
def default_catalog() -> Catalog:
    """The shipped catalogs alone, read once per process."""
    return load_catalog()


def _parse(text: str, source: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise CatalogError([f"{where}not valid YAML/JSON: {exc}"], source) from None


def _merge(
    entries: dict[str, dict[str, CatalogEntry]], data: Any, source: str, *, allow_override: bool
) -> None:
    """Validate ``data`` and add its entries; all problems are raised together."""
    if data is None:
        return  # an empty file adds nothing
    if not isinstance(data, dict):
        raise CatalogError([f"a catalog file is a mapping with sections {_sections()}"], source)
    problems: list[str] = []
    for section, items in data.items():
        if section not in SECTIONS:
            problems.append(f"{section}: unknown section; valid sections: {_sections()}")
            continue
        if not isinstance(items, list):
            problems.append(f"{section}: must be a list of entries")
            continue
        seen: set[str] = set()
        for index, item in enumerate(items):
            problems.extend(
                _merge_entry(
                    entries[section],
                    SECTIONS[section],
                    f"{section}.{index}",
                    item,
                    seen,
                    allow_override=allow_override,
                )
            )
    if problems:
        raise CatalogError(problems, source)


def _merge_entry(
    entries: dict[str, CatalogEntry],
    kind: type[CatalogEntry],
    path: str,
    item: Any,
    seen: set[str],
    *,
    allow_override: bool,
) -> list[str]:
    """Validate one entry into ``entries``; the problems, if any, instead."""
    entry_id = item.get("id") if isinstance(item, dict) else None
    if not isinstance(entry_id, str):
        return [f"{path}: an entry is a mapping with a string 'id'"]
    if entry_id in seen:
        return [f"{path}: id {entry_id!r} appears twice in this file"]
    seen.add(entry_id)
    existing = entries.get(entry_id)
    if existing is not None and not allow_override:
        return [f"{path}: id {entry_id!r} is already defined"]
    fields = dict(item)
    if existing is not None:
        base = existing.model_dump()
        if any(name in item for name in _PRICE_FIELDS):
            for name in _PRICE_FIELDS:
                base.pop(name, None)
        fields = base | item
    try:
        entries[entry_id] = kind.model_validate(fields)
    except ValidationError as exc:
        return _describe(path, exc)
    return []


def _describe(path: str, exc: ValidationError) -> list[str]:
    lines = []
    for error in exc.errors(include_url=False):
        where = ".".join([path, *(str(part) for part in error["loc"])])
        lines.append(f"{where}: {error['msg']}")
    return lines


def _sections() -> str:
    return ", ".join(SECTIONS)
