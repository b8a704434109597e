"""Reading one row without leaving a result open.

On a DuckDB 2 connection, a result that was not read to its end blocks the connection's
next relation or registration ("connection has an unfinished result"): ``fetchone()``
on the control plane's writer connection, then the ingest's ``register()``, fails. So
code that shares a connection reads single rows through :func:`first_row`, which reads
the result to its end.
"""

from __future__ import annotations

from typing import Any

import duckdb


def first_row(result: duckdb.DuckDBPyConnection) -> tuple[Any, ...] | None:
    """The first row of an executed query (None if it has none), the result read fully."""
    rows = result.fetchall()
    return rows[0] if rows else None
