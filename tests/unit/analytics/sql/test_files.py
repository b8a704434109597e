"""The SQL shipped with the package, loaded by name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import analytics
from analytics.sql.files import load_sql

PACKAGE = Path(analytics.__file__).parent


def test_every_name_the_code_loads_is_shipped_and_read_verbatim() -> None:
    """Each literal ``load_sql("name")`` of the analytics package finds its file."""
    names = {
        name
        for source in PACKAGE.rglob("*.py")
        for name in re.findall(r'load_sql\("([a-z0-9_]+)"\)', source.read_text())
    }
    assert names  # the pattern still matches how the code calls it
    for name in sorted(names):
        assert load_sql(name) == (PACKAGE / "sql" / f"{name}.sql").read_text("utf-8"), name


def test_loaded_once_and_unknown_names_fail() -> None:
    assert load_sql("ttft_cdf") is load_sql("ttft_cdf")  # cached: read from disk once
    with pytest.raises(FileNotFoundError):
        load_sql("no_such_query")
