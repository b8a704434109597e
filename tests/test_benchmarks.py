"""benchmarks/: the synthetic records the ingest benchmarks write keep up with the
record schema (a new record column must not break them silently)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np

from scenarios.wire.records import REQUEST_RECORD_SCHEMA

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def test_synthetic_shard_records_match_the_record_schema() -> None:
    spec = importlib.util.spec_from_file_location("analytics_10m", BENCHMARKS / "analytics_10m.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("analytics_10m", module)
    spec.loader.exec_module(module)
    table = module.shard_table(np.random.default_rng(1), "hosted", 0, 50, 8)
    assert table.schema == REQUEST_RECORD_SCHEMA
    assert table.num_rows == 50
    assert table.column("itl_ns").combine_chunks().value_lengths().to_numpy().mean() > 1
