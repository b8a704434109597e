"""A run stored in a real DuckDB file with generated records: 3 providers × 2 regions × 2 stages.

The charts need what a one-region run lacks (shades per region, a region comparison,
errors in some series only), so this writes shards per region, as workers would.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from analytics.store.db import connect
from analytics.store.ingest import BatchMessage, ingest_batches
from analytics.store.runs import PlannedShard, RunStore
from scenarios.model import Scenario
from scenarios.wire.records import batch_to_ipc, records_to_batch
from tests.support.builders import MS, S, failed_result, ok_result
from tests.support.builders import REPORT_SCENARIO as SCENARIO
from workers.client.errors import ErrorClass
from workers.client.result import RequestResult
from workers.prompts.plan import PlannedRequest
from workers.shard.rows import RowContext, record_row

PROVIDERS = ("api", "gpu", "own")
REGIONS = ("eu-west", "us-east")
CONCURRENCY = (1, 4)  # stage 0, stage 1
OK_PER_SHARD = 40
# (provider, region, stage) -> failures sent in that shard.
FAILURES: dict[tuple[str, str, int], list[ErrorClass]] = {
    ("api", "us-east", 1): [ErrorClass.HTTP_429] * 3 + [ErrorClass.TIMEOUT],
    ("gpu", "eu-west", 0): [ErrorClass.HTTP_5XX] * 2,
}
Key = tuple[str, str, int]


def _results(rng: np.random.Generator, key: Key, start_ns: int) -> list[RequestResult]:
    provider, region, stage = key
    base = (
        (60 + 50 * PROVIDERS.index(provider))
        * (1 + 2 * stage)
        * (1.3 if region == "us-east" else 1)
    )
    results = [
        ok_result(
            start_ns + i * 100 * MS,
            float(rng.lognormal(np.log(base), 0.35)),
            # Some gaps are 0 ms (tokens that came in one chunk), as real streams have.
            [0.0, *rng.uniform(4, 9 + 5 * stage, size=12)],
        )
        for i in range(OK_PER_SHARD)
    ]
    results += [
        failed_result(start_ns + (i * 7 + 3) * 100 * MS, error)
        for i, error in enumerate(FAILURES.get(key, []))
    ]
    return results


def store_regional_run(path: Path, run_id: str = "run") -> dict[Key, list[RequestResult]]:
    """Write the run to a DuckDB file at ``path``; return each shard's results."""
    rng = np.random.default_rng(13)
    scenario: dict[str, Any] = {
        **SCENARIO,
        "regions": list(REGIONS),
        "load": {"concurrency": list(CONCURRENCY), "requests_per_level": OK_PER_SHARD},
    }
    # Stages run one after the other, as a sweep does: stage 1 starts 10 s after stage 0.
    shards = {
        (p, r, s): _results(rng, (p, r, s), 10 * S + s * 10 * S)
        for s in range(len(CONCURRENCY))
        for p in PROVIDERS
        for r in REGIONS
    }
    con = connect(path)
    planned = [
        PlannedShard(f"s{s}.{p}.{r}", s, p, r, CONCURRENCY[s], len(results))
        for (p, r, s), results in shards.items()
    ]
    RunStore(con).create_run(run_id, Scenario.model_validate(scenario), planned)
    for (provider, region, stage), results in shards.items():
        shard_id = f"s{stage}.{provider}.{region}"
        ctx = RowContext(
            run_id, stage, shard_id, 1, provider, "m", region, "w", "closed", CONCURRENCY[stage]
        )
        rows = [record_row(ctx, PlannedRequest(i, 50, 100, "p"), r) for i, r in enumerate(results)]
        ingest_batches(
            con, [BatchMessage(run_id, shard_id, 1, 0, batch_to_ipc(records_to_batch(rows)))]
        )
        RunStore(con).shard_done(run_id, shard_id, "finished", 1, None)
    con.close()
    return shards


def open_read_only(path: Path) -> duckdb.DuckDBPyConnection:
    """The stored file, as the report command opens it."""
    return duckdb.connect(str(path), read_only=True)
