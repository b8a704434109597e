"""Analytics at scale: ingest 10M synthetic request records and time the full report.

Records are generated vectorised (numpy → Arrow) in the real REQUEST_RECORD_SCHEMA and
go through the real path: Arrow IPC bytes → ``analytics.store.ingest.ingest_batches`` →
DuckDB, then ``analytics.report.build.build_report`` (summary SQL, bootstrap intervals, chart
data). Before and after are measured side by side in one run:

- *worker-sized ingest*: batches of 256 rows (the publisher's default), 64 per call and
  READ_COUNT (500, what the control plane read from a backlogged stream) per call, on the
  first ``--realistic-rows`` rows, each into a fresh file: *before* is the previous
  ingest code (``legacy_ingest`` below: per-payload IPC parse, 256-row chunks,
  ``executemany`` keys, 16 MB checkpoint threshold), *after* is ``ingest_batches``;
- *bulk ingest*: 65,536-row batches, 4 per call, for the whole data set (after only;
  the writer's checkpoint vacuum is off, ``benchmarks/ingest.py`` compares it on and off);
- *settle*: ``RunStore.shard_done`` per shard, which now stores the shard's
  pre-aggregates (analytics/store/summaries.py), paid once per shard while a run goes on;
- *report*: ``build_report`` exact from the raw records (before; ``--skip-before`` drops
  it) and from the stored aggregates (after), with a profile of the latter.

Usage: python benchmarks/analytics_10m.py [--rows 10000000] [--gaps 8] [--db PATH]
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import io
import pstats
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
from rich.console import Console
from rich.table import Table

from analytics.report.build import build_report
from analytics.report.stored import ExactLimits
from analytics.store.db import connect
from analytics.store.ingest import BatchMessage, ingest_batches
from analytics.store.runs import PlannedShard, RunStore
from scenarios.model import Scenario
from scenarios.settings import PublishSettings
from scenarios.wire.records import REQUEST_RECORD_SCHEMA, STAMPS, batch_to_ipc, ipc_to_table

RUN = "bench"
PROVIDERS = ("hosted", "self")
STAGES = (1, 8, 32, 128)  # concurrency per stage
# Entries the control plane read per call before it sized reads in records
# (api/control/record_buffer.py); kept to compare with earlier results.
READ_COUNT = 500
PRICING = {"input_per_mtok": 0.8, "output_per_mtok": 1.2}
FIXED = {"prompt_tokens": {"dist": "fixed", "value": 512}}
SCENARIO = {
    "name": "analytics-10m",
    "providers": [
        {"name": "hosted", "kind": "simulated", "pricing": PRICING},
        {"name": "self", "kind": "simulated", "deployment": {"hardware": "h100", "gpus": 8}},
    ],
    "workload": {"mix": [{**FIXED, "output_tokens": {"dist": "fixed", "value": 128}}]},
    "load": {"concurrency": list(STAGES), "requests_per_level": 1},
    "slo": {"ttft_ms": 500, "tpot_ms": 50},
}


def shard_table(
    rng: np.random.Generator, provider: str, stage: int, rows: int, gaps: int
) -> pa.Table:
    """``rows`` synthetic records of one shard; ``gaps`` ITL gaps per request on average."""
    conc = STAGES[stage]
    ttft = rng.lognormal(np.log(80 + 15 * conc), 0.45, rows) * 1e6
    n_gaps = rng.poisson(gaps, rows).clip(1)
    offsets = np.zeros(rows + 1, dtype=np.int32)
    np.cumsum(n_gaps, out=offsets[1:])
    flat = (rng.lognormal(np.log(10 + conc / 8), 0.35, int(offsets[-1])) * 1e6).astype(np.int64)
    last = ttft + np.add.reduceat(flat, offsets[:-1])
    end = last + 1e6
    failed = rng.random(rows) < 0.01
    sent = 1.7e18 + np.cumsum(rng.exponential(end.mean() / conc, rows))
    completion = n_gaps + 1
    shard_id = f"s{stage}.{provider}.local"
    columns: dict[str, pa.Array] = {
        "run_id": pa.array([RUN] * rows),
        "stage": pa.array(np.full(rows, stage, np.int32)),
        "shard_id": pa.array([shard_id] * rows),
        "attempt": pa.array(np.ones(rows, np.int32)),
        "seq": pa.array(np.arange(rows, dtype=np.int64)),
        "provider": pa.array([provider] * rows),
        "model": pa.array(["m"] * rows),
        "region": pa.array(["local"] * rows),
        "worker": pa.array(["w"] * rows),
        "load_kind": pa.array(["closed"] * rows),
        "concurrency": pa.array(np.full(rows, conc, np.int32)),
        "planned_prompt_tokens": pa.array(np.full(rows, 512, np.int32)),
        "planned_output_tokens": pa.array(completion.astype(np.int32)),
    }
    stamps = {
        "intended_start": sent - 1e5,
        "sent": sent,
        "first_byte": sent + ttft / 2,
        "first_token": sent + ttft,
        "first_output_token": sent + ttft,
        "last_token": sent + last,
        "end": sent + end,
    }
    for stamp in STAMPS:
        columns[f"{stamp}_at"] = pa.array(stamps[stamp].astype(np.int64), pa.timestamp("ns", "UTC"))
    ok = ~failed
    columns |= {
        "schedule_lag_ns": pa.array(np.full(rows, 100_000, np.int64)),
        "first_byte_ns": pa.array((ttft / 2).astype(np.int64)),
        "ttft_ns": pa.array(ttft.astype(np.int64), mask=failed),
        "ttfot_ns": pa.array(ttft.astype(np.int64), mask=failed),
        "last_token_ns": pa.array(last.astype(np.int64), mask=failed),
        "e2e_ns": pa.array(end.astype(np.int64)),
        "itl_ns": pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat)),
        "token_events": pa.array(completion.astype(np.int32)),
        "prompt_tokens": pa.array(np.full(rows, 512, np.int32), mask=failed),
        "completion_tokens": pa.array(completion.astype(np.int32), mask=failed),
        "reasoning_tokens": pa.nulls(rows, pa.int32()),
        "token_count_source": pa.array(["usage"] * rows),
        "server_prompt_ns": pa.nulls(rows, pa.int64()),
        "server_decode_ns": pa.nulls(rows, pa.int64()),
        "retries": pa.array(np.zeros(rows, np.int32)),
        "retry_wait_ns": pa.array(np.zeros(rows, np.int64)),
        "request_key": pa.nulls(rows, pa.string()),
        "status": pa.array(np.where(ok, "ok", "error")),
        "error_class": pa.array(np.where(ok, None, "http_429")),
        "http_status": pa.array(np.where(ok, 0, 429).astype(np.int16), mask=ok),
        "error_message": pa.array(np.where(ok, None, "HTTP 429")),
        "planned_prompt_source": pa.array(["calibrated"] * rows),
        "prompt_tokens_per_word": pa.array(np.full(rows, 1.3)),
        "tools_offered": pa.array(np.zeros(rows, bool)),
        "tool_call": pa.array(np.zeros(rows, bool)),
        "prompt_count_source": pa.array(np.where(ok, "usage", None)),
        "finish_reason": pa.array(np.where(ok, "length", None)),
    }
    # Columns a later schema adds and this record does not use are null, as they would be.
    for field in REQUEST_RECORD_SCHEMA:
        columns.setdefault(field.name, pa.nulls(rows, field.type))
    return pa.table({f.name: columns[f.name] for f in REQUEST_RECORD_SCHEMA}).cast(
        REQUEST_RECORD_SCHEMA
    )


def messages(table: pa.Table, shard_id: str, batch_rows: int, first_seq: int) -> list[BatchMessage]:
    """The table cut into IPC-encoded batches, as they would arrive from a worker."""
    return [
        BatchMessage(RUN, shard_id, 1, first_seq + i, batch_to_ipc(batch))
        for i, batch in enumerate(table.to_batches(max_chunksize=batch_rows))
    ]


def legacy_ingest(con: duckdb.DuckDBPyConnection, messages: list[BatchMessage]) -> int:
    """The ingest code before this benchmark's changes, kept to measure against."""
    keys = pa.Table.from_pylist(
        [
            {"run_id": m.run_id, "shard_id": m.shard_id, "attempt": m.attempt,
             "batch_seq": m.batch_seq, "position": i}
            for i, m in enumerate(messages)
        ]
    )  # fmt: skip
    con.execute("BEGIN TRANSACTION")
    con.register("incoming_keys", keys)
    fresh = con.execute(
        "SELECT min(k.position) FROM incoming_keys AS k ANTI JOIN ingested_batches AS b "
        "USING (run_id, shard_id, attempt, batch_seq) GROUP BY ALL ORDER BY 1"
    ).fetchall()
    con.unregister("incoming_keys")
    chosen = [messages[row[0]] for row in fresh]
    tables = [ipc_to_table(m.ipc) for m in chosen]
    records = pa.concat_tables(tables).cast(REQUEST_RECORD_SCHEMA)
    con.register("incoming_records", records)
    con.execute("INSERT INTO request_records SELECT * FROM incoming_records")
    con.unregister("incoming_records")
    now = dt.datetime.now(dt.UTC)
    con.executemany(
        "INSERT INTO ingested_batches VALUES (?, ?, ?, ?, ?, ?)",
        [[m.run_id, m.shard_id, m.attempt, m.batch_seq, t.num_rows, now]
         for m, t in zip(chosen, tables, strict=True)],
    )  # fmt: skip
    con.execute("COMMIT")
    return int(records.num_rows)


def ingest(
    con: duckdb.DuckDBPyConnection, msgs: list[BatchMessage], per_call: int, legacy: bool = False
) -> tuple[int, float]:
    """Feed ``msgs`` ``per_call`` at a time, then checkpoint; rows stored and seconds.

    The final CHECKPOINT is counted: a larger WAL threshold defers work to it."""
    rows, started = 0, time.perf_counter()
    for i in range(0, len(msgs), per_call):
        chunk = msgs[i : i + per_call]
        rows += legacy_ingest(con, chunk) if legacy else ingest_batches(con, chunk).rows
    con.execute("CHECKPOINT")
    return rows, time.perf_counter() - started


PUBLISH_BATCH_ROWS = PublishSettings().batch_rows


def worker_sized(
    workdir: Path,
    scenario: Scenario,
    table: pa.Table,
    per_call: int,
    legacy: bool,
    batch_rows: int = 256,
) -> tuple[int, float]:
    """Ingest ``table`` in ``batch_rows``-row batches into a fresh file."""
    path = workdir / f"worker-{batch_rows}-{per_call}-{'before' if legacy else 'after'}.duckdb"
    con = connect(path)
    if legacy:
        con.execute("SET checkpoint_threshold = '16MB'")  # DuckDB's default, used before
    shard = PlannedShard("s0.hosted.local", 0, "hosted", "local", 1, table.num_rows)
    RunStore(con).create_run(RUN, scenario, [shard])
    result = ingest(con, messages(table, shard.shard_id, batch_rows, 0), per_call, legacy)
    con.close()
    path.unlink()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--gaps", type=int, default=8, help="mean ITL gaps per request")
    parser.add_argument("--realistic-rows", type=int, default=1_000_000)
    parser.add_argument("--db", type=Path, default=None)
    parser.add_argument("--skip-before", action="store_true", help="skip the exact report")
    args = parser.parse_args()
    console = Console()
    workdir = Path(tempfile.mkdtemp(prefix="tokenbench-bench-"))
    db = args.db or workdir / "bench.duckdb"
    con = connect(db)
    shards = [(p, s) for s in range(len(STAGES)) for p in PROVIDERS]
    per_shard = args.rows // len(shards)
    planned = [
        PlannedShard(f"s{s}.{p}.local", s, p, "local", STAGES[s], per_shard) for p, s in shards
    ]
    RunStore(con).create_run(RUN, Scenario.model_validate(SCENARIO), planned)

    rng = np.random.default_rng(42)
    started = time.perf_counter()
    tables = {key: shard_table(rng, key[0], key[1], per_shard, args.gaps) for key in shards}
    generate_s = time.perf_counter() - started
    gap_count = sum(
        pa.compute.sum(pa.compute.list_value_length(t["itl_ns"])).as_py() for t in tables.values()
    )
    results: list[tuple[str, str, str]] = [
        (
            "records / ITL gaps",
            f"{per_shard * len(shards):,} / {gap_count:,}",
            f"{len(shards)} shards",
        ),
        ("generate (numpy → Arrow)", f"{generate_s:.2f} s", ""),
    ]

    # Worker-sized batches on the first shard's first rows, before and after, each into a
    # fresh file; then the whole data set in bulk batches (after).
    scenario = Scenario.model_validate(SCENARIO)
    first_key = shards[0]
    sample = tables[first_key].slice(0, min(args.realistic_rows, per_shard))
    for per_call in (64, READ_COUNT):
        speeds = []
        for legacy in (True, False):
            r, s = worker_sized(workdir, scenario, sample, per_call, legacy)
            speeds.append(r / s)
        results.append(
            (
                f"ingest, 256-row batches × {per_call}/call",
                f"{speeds[0]:,.0f} → {speeds[1]:,.0f} rows/s",
                f"before → after, {sample.num_rows:,} rows, incl. final checkpoint",
            )
        )
    # The publisher's default batch size since this benchmark showed that per-entry and
    # per-transaction costs dominate small batches (PublishSettings.batch_rows).
    r, s = worker_sized(workdir, scenario, sample, READ_COUNT, False, PUBLISH_BATCH_ROWS)
    results.append(
        (
            f"ingest, {PUBLISH_BATCH_ROWS}-row batches × {READ_COUNT}/call",
            f"{r / s:,.0f} rows/s",
            f"publisher default, {sample.num_rows:,} rows, incl. final checkpoint",
        )
    )
    bulk_rows, bulk_s = 0, 0.0
    for key in shards:
        msgs = messages(tables[key], f"s{key[1]}.{key[0]}.local", 65_536, 0)
        r, s = ingest(con, msgs, 4)
        bulk_rows, bulk_s = bulk_rows + r, bulk_s + s
    results.append(
        (
            "ingest, 65,536-row batches × 4/call",
            f"{bulk_rows / bulk_s:,.0f} rows/s",
            f"{bulk_rows:,} rows in {bulk_s:.2f} s (after)",
        )
    )
    store = RunStore(con)
    started = time.perf_counter()
    for provider, stage in shards:
        store.shard_done(RUN, f"s{stage}.{provider}.local", "finished", 1, None)
    settle_s = time.perf_counter() - started
    results.append(
        (
            "settle shards (store pre-aggregates)",
            f"{settle_s:.2f} s",
            f"{settle_s / len(shards):.2f} s per {per_shard:,}-row shard, once per shard",
        )
    )
    store.finish_run(RUN, "finished")
    con.execute("CHECKPOINT")
    del tables, sample
    con.close()

    con = connect(db, read_only=True)
    build_report(con, RUN)  # warm the file cache once, as a second `report` would be
    if not args.skip_before:
        exact = ExactLimits(ok_requests=10**15, itl_gaps=10**15)
        started = time.perf_counter()
        build_report(con, RUN, exact_limits=exact)
        before_s = time.perf_counter() - started
    started = time.perf_counter()
    report = build_report(con, RUN)
    after_s = time.perf_counter() - started
    results.append(
        (
            "full report (build_report)",
            f"{'–' if args.skip_before else f'{before_s:.2f}'} → {after_s:.2f} s",
            f"exact from raw rows → {report.percentiles['method']}; {len(report.stages)} rows",
        )
    )
    profiler = cProfile.Profile()
    profiler.enable()
    build_report(con, RUN)
    profiler.disable()
    con.close()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(12)

    table = Table(title=f"analytics benchmark · {db}")
    for column in ("what", "result", "detail"):
        table.add_column(column)
    for line in results:
        table.add_row(*line)
    console.print(table)
    console.print("targets: ingest ≥ 1M rows/s; full report on 10M rows ≤ 2 s (2 cores)")
    console.print("where the report's time goes (after, cumulative):")
    console.print(text.getvalue(), highlight=False, markup=False)


if __name__ == "__main__":
    main()
