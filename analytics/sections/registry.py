"""The ordered registry of report sections.

A section module registers its function with :func:`section`, giving its place in the
report (``order``: lower first). Every module of this package is imported by
:func:`build_sections`, so a new section is one module (and its test): no list to edit.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import TYPE_CHECKING

from analytics.sections.model import Section, SectionBuilder, SectionOptions

if TYPE_CHECKING:
    from collections.abc import Callable

    from analytics.report.build import RunReport

__all__ = ["REGISTRY", "Registered", "build_sections", "section"]

# The package's modules that hold no sections.
_NOT_SECTIONS = frozenset({"model", "registry"})


@dataclass(frozen=True, slots=True)
class Registered:
    """A section function and its place in the report."""

    order: int
    name: str
    build: SectionBuilder


REGISTRY: dict[str, Registered] = {}


def section(order: int) -> Callable[[SectionBuilder], SectionBuilder]:
    """Register a section function at ``order`` (a place no other section takes)."""

    def register(build: SectionBuilder) -> SectionBuilder:
        name = f"{build.__module__}.{build.__qualname__}"
        taken = [r.name for r in REGISTRY.values() if r.order == order and r.name != name]
        if taken:
            raise ValueError(f"section order {order} of {name} is taken by {taken[0]}")
        REGISTRY[name] = Registered(order, name, build)
        return build

    return register


def _load() -> None:
    package = importlib.import_module("analytics.sections")
    for module in pkgutil.iter_modules(package.__path__):
        if module.name not in _NOT_SECTIONS:
            importlib.import_module(f"analytics.sections.{module.name}")


def registered() -> list[Registered]:
    """Every section function, in report order."""
    _load()
    return sorted(REGISTRY.values(), key=lambda r: r.order)


def build_sections(report: RunReport, options: SectionOptions | None = None) -> list[Section]:
    """The report's sections, in order (a section with nothing to show is left out)."""
    chosen = options or SectionOptions()
    return [s for entry in registered() for s in entry.build(report, chosen)]
