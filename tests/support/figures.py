"""Two reports of the same rows compared: equal, floats within a relative 1e-9.

DuckDB sums in parallel in no fixed order, so a mean or a standard deviation of the same
rows, computed twice (in two files, or two queries), may differ in its last bits.
"""

from __future__ import annotations

import math
from typing import Any


def same_figures(a: Any, b: Any, path: str = "report") -> bool:
    """``a`` equals ``b``, floats within a relative 1e-9 (AssertionError names where not)."""
    if isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), path
        return all(same_figures(a[k], b[k], f"{path}.{k}") for k in a)
    if isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), path
        return all(
            same_figures(x, y, f"{path}[{i}]") for i, (x, y) in enumerate(zip(a, b, strict=True))
        )
    if isinstance(a, float) and isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12), (path, a, b)
        return True
    assert a == b, (path, a, b)
    return True
