"""Fixtures of the adaptive runs' tests: a DuckDB file of the test's own."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from analytics.store.db import connect


@pytest.fixture
def con(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    return connect(tmp_path / "adaptive.duckdb")
