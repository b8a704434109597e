"""A control-plane app served by uvicorn in a thread of the test process, on a free
loopback port, and a large stored run to read from it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import duckdb
import numpy as np
import pyarrow as pa
import uvicorn
from fastapi import FastAPI

from analytics.store.ingest import BatchMessage, ingest_batches
from analytics.store.runs import PlannedShard, RunStore
from api.local.redis_server import free_port
from scenarios.model import Scenario
from scenarios.wire.records import REQUEST_RECORD_SCHEMA, batch_to_ipc, records_to_batch
from tests.support.builders import ok_result
from workers.prompts.plan import PlannedRequest
from workers.shard.rows import RowContext, record_row


@contextmanager
def served(app: FastAPI) -> Iterator[str]:
    """``app`` served on loopback until the block ends; yields its base URL."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, name="served-app", daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the app did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


def store_large_run(
    con: duckdb.DuckDBPyConnection, run_id: str, scenario: dict[str, object], per_shard: int
) -> pa.Table:
    """A finished run of two stages of one shard each, ``per_shard`` records apiece (one
    record repeated, each with its own ``seq`` and TTFT), ingested in 8,192-row batches
    out of order; returns the records in export order (stage, shard, seq)."""
    shards = {0: "s0.sim.local", 1: "s1.sim.local"}
    planned = [PlannedShard(s, stage, "sim", "local", 1, per_shard) for stage, s in shards.items()]
    RunStore(con).create_run(run_id, Scenario.model_validate(scenario), planned)
    tables = []
    for stage, shard_id in shards.items():
        ctx = RowContext(run_id, stage, shard_id, 1, "sim", "m", "local", "w", "closed", 1)
        row = record_row(ctx, PlannedRequest(0, 50, 100, "p"), ok_result(10**9, 80.0, [1.0] * 4))
        one = pa.Table.from_batches([records_to_batch([row])])
        table = one.take(np.zeros(per_shard, dtype=np.int64))
        seq = np.arange(per_shard, dtype=np.int64)
        table = table.set_column(table.schema.get_field_index("seq"), "seq", pa.array(seq))
        ttft = pa.array(seq * 1000 + stage, pa.int64())
        table = table.set_column(table.schema.get_field_index("ttft_ns"), "ttft_ns", ttft)
        table = table.cast(REQUEST_RECORD_SCHEMA)
        tables.append(table)
        # Stored newest batch first: the export's order is the query's, not the file's.
        batches = table.to_batches(max_chunksize=8192)[::-1]
        ingest_batches(
            con,
            [BatchMessage(run_id, shard_id, 1, i, batch_to_ipc(b)) for i, b in enumerate(batches)],
        )
        RunStore(con).shard_done(run_id, shard_id, "finished", 1, None)
    RunStore(con).finish_run(run_id, "finished")
    return pa.concat_tables(tables)
