"""The SQL shipped with the package (``analytics/sql/<name>.sql``), loaded by name."""

from __future__ import annotations

from functools import cache
from importlib import resources


@cache
def load_sql(name: str) -> str:
    """Text of ``analytics/sql/<name>.sql``."""
    return resources.files("analytics.sql").joinpath(f"{name}.sql").read_text("utf-8")
