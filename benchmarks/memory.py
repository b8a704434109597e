"""Resident memory: a worker per 1,000 streams, the control plane per 1M records, and a
soak that shows whether either grows.

Run: ``python benchmarks/memory.py`` (``--help``; ``--minutes 10`` is the default soak).

0. *Per-request state* of a shard in one long stage (tracemalloc, in this process): the
   previous per-request int lists against the structures the shard keeps now.
1. *Worker per 1,000 streams*: ``tokenbench run`` (embedded Redis, worker, DuckDB)
   against ``tests/fakes/sse_server.py`` with two closed-loop stages, 1 stream then
   ``--streams`` (1,000); the worker's RSS is sampled every 0.2 s and the figure is the
   largest sample of the big stage minus the median of the one-stream stage, per 1,000.
2. *Control plane per 1M records*: the control plane's ingest (``analytics.store.ingest``, the
   Arrow IPC → DuckDB path every record takes) of ``--records`` synthetic records in
   1,024-row batches (the publisher's default), 64 per call, into a fresh DuckDB file, in
   a child process; RSS after set-up, after every 250k records and at the end (and the
   peak), per 1M.
3. *Control plane exporting 1M records* (``GET /v1/runs/{id}/records``): a run of
   ``--records`` synthetic records (two shards) stored in a DuckDB file, then exported in
   a fresh child process per way and format (Arrow IPC stream, Parquet): *before*, as
   the route did until issue 14 (the whole answer as one Arrow table, encoded into a
   buffer, copied to bytes); *after*, ``analytics/query/record_export.py`` (a record-batch
   reader encoded piece by piece, each piece dropped as a client reads it), with DuckDB's
   default memory limit and with ``TOKENBENCH__DUCKDB__MEMORY_LIMIT=256MB`` (the query's
   sort spills past it). Peak RSS over the child's RSS after opening the file, and the
   answer's size.
4. *Soak*: an open loop at ``--rps`` (500) for ``--minutes`` (10), at most ``--cap``
   (1,024) requests in flight (bounded: a machine too busy to keep up waits for slots
   and counts what it could not send, ``not_sent``), once as one long stage
   and once as ``--stages`` (5) stages of equal length in one run, against the same
   loopback endpoint (answers of ``--tokens`` tokens, 16, so the client's CPU stays
   below saturation on 2 cores). RSS of the worker and of the control plane (the
   ``tokenbench run`` process, which ingests) every minute, and the slope over minutes
   2..end (least squares, MB/min). Before issue 14 a single 600 s stage grew the worker
   by ~5.45 MB/min: per-request Python int lists in the shard's health, the open loop and
   the closed loop, now bounded histograms and 8-byte arrays (docs/load.md, "Memory").
5. *A worker at 10,000 streams* (``--parts 10k``; the target: at most 700 MB): one
   open-loop stage of ``--streams-10k`` (10,000) constant arrivals over ``--ramp-s``
   (50 s, so 200 req/s) with answers of ``--tokens-10k`` (1,024) tokens at
   ``--itl-ms-10k`` (500 ms) against ``tests/fakes/sse_server.py`` (one timer for every
   stream), so each stream stays open ~512 s and all of them are in flight together:
   10,000 streams make 20,000 token events/s, what one worker process drives on this
   2-core machine beside the endpoint (docs/load.md). The worker's peak RSS, its RSS
   before the first send, the streams in flight at the peak (from the records:
   sent <= t < end) and the most in flight at any second, the worker's descriptors, and
   how late the endpoint wrote its events (its ``GET /stats``). ~10 minutes.
6. *A soak against the simulator* (``--parts soak60``; the target: the first and last
   ten minutes' mean RSS within 5 %): one open-loop stage at ``--rps`` for ``--minutes``
   (60 when only this part is asked for and ``--minutes`` is not given) against
   ``tokenbench simulate`` (50 ms TTFT, 20 ms ITL, answers of ``--tokens``), at most
   ``--cap`` in flight. RSS of the worker, the control plane and the simulator printed
   every minute as it goes, then the mean RSS of the first and of the last ten minutes
   of the stage (of a third of it, for a soak shorter than 30 minutes) and the change.
   ``python benchmarks/memory.py --parts soak60 --minutes 60``.

Everything targets loopback only and every loop is bounded in count and time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import httpx
import numpy as np
import psutil
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from end_to_end_accuracy import sse_server
from processes import spawn, wait_http

from api.local.redis_server import free_port

MB = 1024 * 1024
TOKENBENCH = str(Path(sys.executable).with_name("tokenbench"))


def rss(process: psutil.Process | None) -> int | None:
    """Resident bytes of ``process`` (None once it is gone)."""
    if process is None:
        return None
    try:
        return int(process.memory_info().rss)
    except psutil.Error:
        return None


def find_worker(parent: psutil.Process) -> psutil.Process | None:
    """The worker process that ``tokenbench run`` started (its command line says so)."""
    try:
        for child in parent.children(recursive=True):
            if any("worker" in part for part in child.cmdline()):
                return child
    except psutil.Error:
        return None
    return None


def descriptors(process: psutil.Process | None) -> int | None:
    """Open descriptors of ``process`` (None once it is gone)."""
    if process is None:
        return None
    try:
        return int(process.num_fds())
    except psutil.Error:
        return None


class Sampler:
    """Samples the RSS of ``tokenbench run`` and its worker every ``period_s``; with
    ``extra``, that process's RSS too (an endpoint), with ``count_fds`` the worker's
    descriptors, and ``on_sample`` is called after each sample (live output)."""

    def __init__(
        self,
        parent: psutil.Process,
        period_s: float,
        extra: psutil.Process | None = None,
        count_fds: bool = False,
        on_sample: Callable[[Sampler], None] | None = None,
    ) -> None:
        self.parent = parent
        self.period_s = period_s
        self.samples: list[tuple[float, int | None, int | None]] = []  # (wall s, worker, plane)
        self.extra_rss: list[int | None] = []  # beside each sample
        self.worker_fds: list[int | None] = []  # beside each sample (count_fds)
        self._extra = extra
        self._count_fds = count_fds
        self._on_sample = on_sample
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        worker = None
        while not self._stop.wait(self.period_s):
            worker = worker or find_worker(self.parent)
            self.samples.append((time.time(), rss(worker), rss(self.parent)))
            self.extra_rss.append(rss(self._extra))
            self.worker_fds.append(descriptors(worker) if self._count_fds else None)
            if self._on_sample is not None:
                self._on_sample(self)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def run_tokenbench(
    args: list[str],
    db: Path,
    period_s: float,
    timeout_s: float,
    **sampling: Any,
) -> tuple[Sampler, int, str]:
    """``tokenbench run ARGS --db DB`` sampled (``sampling``: the Sampler's options);
    the sampler, exit code and stderr tail."""
    env = {k: v for k, v in os.environ.items() if k != "TOKENBENCH__REDIS__URL"}
    command = [TOKENBENCH, "run", *args, "--db", str(db), "--format", "json", "-o", os.devnull]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    sampler = Sampler(psutil.Process(process.pid), period_s, **sampling)
    _, stderr = process.communicate(timeout=timeout_s)
    sampler.stop()
    return sampler, process.returncode, stderr.decode(errors="replace")[-300:]


def stage_windows(db: Path) -> dict[int, tuple[float, float]]:
    """Each stage's first send and last end, in epoch seconds."""
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(
            "SELECT stage, epoch_ns(min(sent_at)), epoch_ns(max(end_at)) FROM requests GROUP BY 1"
        ).fetchall()
    return {stage: (start / 1e9, end / 1e9) for stage, start, end in rows}


def worker_per_streams(url: str, streams: int, seconds: float, work: Path) -> dict[str, Any]:
    """Worker RSS with ``streams`` streams in flight over one stream, per 1,000 streams."""
    db = work / "streams.duckdb"
    sampler, code, err = run_tokenbench(
        ["--target", url, "--model", "fake", "--concurrency", f"1,{streams}",
         "--duration", str(seconds), "--requests", "1000000", "--prompt-tokens", "32",
         "--output-tokens", "64"],
        db, 0.2, seconds * 4 + 120,
    )  # fmt: skip
    if code != 0:
        return {"failed": err}
    windows = stage_windows(db)

    def during(stage: int) -> list[int]:
        start, end = windows[stage]
        return [w for t, w, _ in sampler.samples if w is not None and start <= t <= end]

    base, busy = during(0), during(1)
    if not base or not busy:
        return {"failed": "no RSS samples inside a stage"}
    one = float(np.median(base))
    peak = max(busy)
    return {
        "one_stream_mb": one / MB,
        "peak_mb": peak / MB,
        "per_1000_mb": (peak - one) / MB * 1000 / streams,
    }


INGEST_CHILD = """
import os, sys, psutil, numpy as np
sys.path.insert(0, {bench!r})
import analytics_10m as a
from analytics.store.db import connect
from analytics.store.ingest import ingest_batches
process = psutil.Process()
con = connect({db!r})
rng = np.random.default_rng(7)
before = process.memory_info().rss
print("rss", 0, before, flush=True)
done, seq, chunk = 0, 0, 65_536
while done < {records}:
    rows = min(chunk, {records} - done)
    table = a.shard_table(rng, "p", 1, rows, 8)
    msgs = a.messages(table, "s1.p.local", 1024, seq)
    seq += len(msgs)
    for i in range(0, len(msgs), 64):
        ingest_batches(con, msgs[i : i + 64])
    done += rows
    del table, msgs
    if done % 262_144 < chunk or done >= {records}:
        print("rss", done, process.memory_info().rss, flush=True)
con.execute("CHECKPOINT")
import resource
print("peak", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, flush=True)
"""


def control_plane_per_records(records: int, work: Path) -> dict[str, Any]:
    """RSS of the ingest path per 1M records, in a child process."""
    code = INGEST_CHILD.format(
        bench=str(Path(__file__).resolve().parent), db=str(work / "ingest.duckdb"), records=records
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=1800, check=False
    )
    if out.returncode != 0:
        return {"failed": out.stderr[-300:]}
    points = [(int(p[1]), int(p[2])) for p in (line.split() for line in out.stdout.splitlines())
              if p and p[0] == "rss"]  # fmt: skip
    peak = next(int(line.split()[1]) for line in out.stdout.splitlines() if line.startswith("peak"))
    (_, start), (stored, end) = points[0], points[-1]
    return {
        "start_mb": start / MB,
        "end_mb": end / MB,
        "peak_mb": peak / MB,
        "per_1m_mb": (end - start) / MB * 1_000_000 / max(stored, 1),
        "curve": points,
    }


EXPORT_STORE_CHILD = """
import sys, numpy as np
sys.path.insert(0, {bench!r})
import analytics_10m as a
from analytics.store.db import connect
from analytics.store.ingest import ingest_batches
from analytics.store.runs import PlannedShard, RunStore
from scenarios.model import Scenario
con = connect({db!r})
half = {records} // 2
shards = [("hosted", 0), ("hosted", 1)]
planned = [PlannedShard(f"s{{s}}.{{p}}.local", s, p, "local", a.STAGES[s], half) for p, s in shards]
RunStore(con).create_run(a.RUN, Scenario.model_validate(a.SCENARIO), planned)
rng = np.random.default_rng(11)
for p, s in shards:
    table = a.shard_table(rng, p, s, half, 8)
    msgs = a.messages(table, f"s{{s}}.{{p}}.local", 65_536, 0)
    for i in range(0, len(msgs), 4):
        ingest_batches(con, msgs[i : i + 4])
    RunStore(con).shard_done(a.RUN, f"s{{s}}.{{p}}.local", "finished", 1, None)
RunStore(con).finish_run(a.RUN, "finished")
con.execute("CHECKPOINT")
print(con.execute("SELECT count(*) FROM requests").fetchone()[0])
"""

EXPORT_CHILD = """
import resource, sys, psutil
import pyarrow as pa, pyarrow.parquet as pq
from analytics.store.db import connect
from analytics.query.record_export import arrow_stream, parquet_stream, record_reader
run, way, fmt = "bench", {way!r}, {fmt!r}
con = connect({db!r}, memory_limit={limit!r})
start = psutil.Process().memory_info().rss
size = 0
if way == "before":
    table = con.sql(
        "SELECT * FROM requests WHERE run_id = ? ORDER BY stage, shard_id, seq", params=[run]
    ).to_arrow_table()
    sink = pa.BufferOutputStream()
    if fmt == "parquet":
        pq.write_table(table, sink)
    else:
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
    body = sink.getvalue().to_pybytes()
    size = len(body)
else:
    encode = parquet_stream if fmt == "parquet" else arrow_stream
    for piece in encode(record_reader(con, run)):
        size += len(piece)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(start, peak, size)
"""


# DuckDB's own bound (TOKENBENCH__DUCKDB__MEMORY_LIMIT): the query's sort spills past it.
EXPORT_LIMIT = "256MB"


def export_memory(records: int, work: Path) -> dict[str, Any]:
    """Peak RSS of exporting a run of ``records`` records, before and after, per format."""
    db = work / "export.duckdb"
    bench = str(Path(__file__).resolve().parent)
    stored = subprocess.run(
        [sys.executable, "-c", EXPORT_STORE_CHILD.format(bench=bench, db=str(db), records=records)],
        capture_output=True, text=True, timeout=1800, check=False,
    )  # fmt: skip
    if stored.returncode != 0:
        return {"failed": stored.stderr[-300:]}
    rows: dict[tuple[str, str], tuple[int, int, int]] = {}
    ways = [("before", None), ("after", None), (f"after, DuckDB memory_limit {EXPORT_LIMIT}",
            EXPORT_LIMIT)]  # fmt: skip
    for fmt in ("arrow", "parquet"):
        for way, limit in ways:
            code = EXPORT_CHILD.format(db=str(db), way=way, fmt=fmt, limit=limit)
            out = subprocess.run(
                [sys.executable, "-c", code],
                capture_output=True, text=True, timeout=1800, check=False,
            )  # fmt: skip
            if out.returncode != 0:
                return {"failed": out.stderr[-300:]}
            start, peak, size = (int(x) for x in out.stdout.split()[-3:])
            rows[(fmt, way)] = (start, peak, size)
    db.unlink()
    return {"records": int(stored.stdout.split()[-1]), "rows": rows}


def soak(
    url: str, rps: float, minutes: float, stages: int, tokens: int, cap: int, work: Path
) -> dict[str, Any]:
    """An open loop at ``rps`` for ``minutes`` in ``stages`` equal stages, at most ``cap``
    requests in flight (a machine too busy to keep up counts arrivals ``not_sent`` rather
    than piling up tasks); RSS per minute."""
    seconds = minutes * 60 / stages
    db = work / f"soak-{stages}.duckdb"
    scenario = work / f"soak-{stages}.yaml"
    scenario.write_text(
        json.dumps(
            {
                "name": f"soak-{stages}",
                "providers": [{"name": "sse", "kind": "openai", "base_url": url, "model": "fake"}],
                "workload": {"mix": [{"prompt_tokens": {"dist": "fixed", "value": 32},
                                      "output_tokens": {"dist": "fixed", "value": tokens}}]},
                "load": {"rate": {"rps": [rps] * stages, "arrival": "poisson",
                                  "max_in_flight": cap},
                         "duration_s": seconds, "requests_per_level": int(rps * seconds * 2)},
            }
        )
    )  # fmt: skip
    sampler, code, err = run_tokenbench([str(scenario)], db, 1.0, minutes * 60 * 2 + 600)
    if code != 0:
        return {"failed": err}
    with duckdb.connect(str(db), read_only=True) as con:
        (records,) = con.execute("SELECT count(*) FROM requests").fetchone() or (0,)
        healths = [json.loads(h) for (h,) in con.execute(
            "SELECT health FROM shard_attempts WHERE health IS NOT NULL").fetchall()]  # fmt: skip
    start = min(t for t, w, _ in sampler.samples if w is not None)
    per_minute: list[tuple[int, float, float]] = []
    for minute in range(int(minutes) + 1):
        points = [
            (w, p)
            for t, w, p in sampler.samples
            if w is not None and p is not None and minute * 60 <= t - start < minute * 60 + 60
        ]
        if points:
            per_minute.append((minute, points[-1][0] / MB, points[-1][1] / MB))

    def slope(column: Callable[[tuple[int, float, float]], float]) -> float:
        steady = [row for row in per_minute if row[0] >= 2]
        if len(steady) < 2:
            return float("nan")
        x = np.array([row[0] for row in steady], dtype=float)
        y = np.array([column(row) for row in steady])
        return float(np.polyfit(x, y, 1)[0])

    return {
        "records": int(records),
        "not_sent": sum(int(h.get("not_sent") or 0) for h in healths),
        "cap_waits": sum(int(h.get("cap_waits") or 0) for h in healths),
        "per_minute": per_minute,
        "worker_slope": slope(lambda row: row[1]),
        "plane_slope": slope(lambda row: row[2]),
    }


def open_loop_scenario(
    name: str,
    url: str,
    rps: float,
    seconds: float,
    requests: int,
    tokens: int,
    arrival: str = "poisson",
    cap: int | None = None,
    timeout_s: float = 300.0,
) -> dict[str, Any]:
    """One open-loop stage against ``url`` (an OpenAI-compatible endpoint), as JSON."""
    provider = {"name": "sse", "kind": "openai", "base_url": url, "model": "fake",
                "timeout_s": timeout_s}  # fmt: skip
    rate: dict[str, Any] = {"rps": [rps], "arrival": arrival}
    if cap is not None:
        rate["max_in_flight"] = cap
    return {
        "name": name,
        "providers": [provider],
        "workload": {"mix": [{"prompt_tokens": {"dist": "fixed", "value": 32},
                              "output_tokens": {"dist": "fixed", "value": tokens}}]},
        "load": {"rate": rate, "duration_s": seconds, "requests_per_level": requests},
    }  # fmt: skip


def raise_descriptor_limit(need: int) -> str | None:
    """Raise this process's soft RLIMIT_NOFILE to at least ``need`` (the children it
    starts inherit it); why it cannot, or None."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < need:
        return f"needs {need:,} descriptors a process, the hard RLIMIT_NOFILE is {hard:,}"
    if soft != resource.RLIM_INFINITY and soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
    return None


def endpoint_lateness(url: str, worst: dict[str, float]) -> None:
    """Fold the fake endpoint's lateness since its last ``GET /stats`` into ``worst``
    (events written, largest p99 and max in ms); reading it also empties its list."""
    try:
        stats = httpx.get(f"{url}/stats", timeout=10).json()
    except (httpx.HTTPError, ValueError):
        return
    worst["events"] = worst.get("events", 0) + stats["events"]
    worst["p99_ms"] = max(worst.get("p99_ms", 0.0), stats["p99_ms"])
    worst["max_ms"] = max(worst.get("max_ms", 0.0), stats["max_ms"])


def in_flight_at(db: Path, instants: list[float]) -> list[int]:
    """Requests in flight (sent <= t < end) at each epoch second of ``instants``."""
    with duckdb.connect(str(db), read_only=True) as con:
        sent, end = con.execute(
            "SELECT list(epoch_ns(sent_at) / 1e9), list(epoch_ns(end_at) / 1e9) FROM requests"
        ).fetchone() or ([], [])
    sent_sorted, end_sorted = np.sort(np.array(sent)), np.sort(np.array(end))
    at = np.array(instants)
    # Every request that ended by t was sent before it: the difference is what is open.
    started = np.searchsorted(sent_sorted, at, side="right")
    ended = np.searchsorted(end_sorted, at, side="right")
    return [int(n) for n in started - ended]


def worker_at_10k(
    url: str, streams: int, tokens: int, itl_ms: float, ramp_s: float, work: Path
) -> dict[str, Any]:
    """A worker with ``streams`` open-loop streams of ``tokens``-token answers in flight:
    its peak RSS and the streams in flight then."""
    db = work / "10k.duckdb"
    scenario = work / "10k.yaml"
    stream_s = tokens * itl_ms / 1000
    rps = streams / ramp_s
    # Constant gaps of 1/rps: arrivals at 0 .. (streams - 1)/rps, all inside the ramp.
    scenario.write_text(json.dumps(open_loop_scenario(
        "worker-10k", url, rps, ramp_s, streams, tokens, arrival="constant",
        timeout_s=min(3600.0, stream_s * 2 + 120))))  # fmt: skip
    lateness: dict[str, float] = {}
    done = threading.Event()

    def poll() -> None:  # every 10 s: the endpoint's list of lateness is emptied by a read
        while not done.wait(10):
            endpoint_lateness(url, lateness)

    poller = threading.Thread(target=poll, daemon=True)  # apart: a slow answer delays no sample
    poller.start()
    try:
        sampler, code, err = run_tokenbench(
            [str(scenario)], db, 1.0, ramp_s + stream_s * 3 + 600, count_fds=True
        )
    finally:
        done.set()
        poller.join()
    endpoint_lateness(url, lateness)
    if code != 0:
        return {"failed": err}
    with duckdb.connect(str(db), read_only=True) as con:
        records, errors, events, first_sent = con.execute(
            "SELECT count(*), count(*) FILTER (WHERE status <> 'ok'), sum(token_events), "
            "min(epoch_ns(sent_at)) / 1e9 FROM requests"
        ).fetchone() or (0, 0, 0, 0.0)
    points = [(t, w, fds) for (t, w, _), fds in zip(sampler.samples, sampler.worker_fds,
              strict=True) if w is not None]  # fmt: skip
    before = [w for t, w, _ in points if t < first_sent]
    peak_t, peak, _ = max(points, key=lambda point: point[1])
    flights = in_flight_at(db, [t for t, _, _ in points])
    at_peak = flights[[t for t, _, _ in points].index(peak_t)]
    every = max(1, len(points) // 24)  # about 24 points of the curve
    curve = [(round(t - first_sent), w / MB, n) for (t, w, _), n in
             zip(points[::every], flights[::every], strict=True)]  # fmt: skip
    return {
        "curve": curve,
        "peak_mb": peak / MB,
        "before_mb": (before[-1] if before else points[0][1]) / MB,
        "in_flight_at_peak": at_peak,
        "most_in_flight": max(flights),
        "peak_fds": max((fds or 0) for _, _, fds in points),
        "records": int(records),
        "errors": int(errors or 0),
        "token_events": int(events or 0),
        "rps": rps,
        "stream_s": stream_s,
        "lateness": lateness,
        "load": os.getloadavg(),
    }


def soak_simulator(
    rps: float, minutes: float, tokens: int, cap: int, work: Path, console: Console
) -> dict[str, Any]:
    """One open-loop stage at ``rps`` for ``minutes`` against ``tokenbench simulate``;
    RSS of the worker, the control plane and the simulator each minute (printed as it
    goes) and the mean of the first against the last window."""
    port = free_port()
    sim = spawn(["simulate", "--port", str(port), "--ttft-ms", "50", "--itl-ms", "20"],
                dict(os.environ), work / "simulate.log")  # fmt: skip
    try:
        wait_http(f"http://127.0.0.1:{port}/health")
        url = f"http://127.0.0.1:{port}/v1"
        seconds = minutes * 60
        db, scenario = work / "soak60.duckdb", work / "soak60.yaml"
        document = open_loop_scenario(
            "soak-simulator", url, rps, seconds, int(rps * seconds * 2), tokens, cap=cap
        )
        scenario.write_text(json.dumps(document))
        printed = [0]
        loads: list[float] = []
        # The DuckDB file's size each minute: DuckDB keeps the blocks it wrote cached
        # until its memory_limit, so the control plane's RSS less it is the rest.
        files: list[tuple[float, int, int]] = []  # (time, control plane RSS, file size)
        started = time.time()

        def each_minute(sampler: Sampler) -> None:
            t, worker, plane = sampler.samples[-1]
            minute = int((t - started) // 60)
            if minute > printed[0]:
                printed[0] = minute
                loads.append(os.getloadavg()[0])
                files.append((t, plane or 0, db.stat().st_size if db.exists() else 0))
                mb = [f"{v / MB:.1f}" if v else "-" for v in (worker, plane,
                      sampler.extra_rss[-1])]  # fmt: skip
                console.print(f"[dim]  minute {minute}: RSS MB worker {mb[0]}, control "
                              f"plane {mb[1]}, simulator {mb[2]}; DuckDB file "
                              f"{files[-1][2] / MB:.1f} MB; load {loads[-1]:.1f}"
                              "[/dim]")  # fmt: skip

        sampler, code, err = run_tokenbench(
            [str(scenario)], db, 1.0, seconds * 2 + 600,
            extra=psutil.Process(sim.pid), on_sample=each_minute,
        )  # fmt: skip
    finally:
        sim.terminate()
        sim.wait(30)
    if code != 0:
        return {"failed": err}
    with duckdb.connect(str(db), read_only=True) as con:
        records, errors = con.execute(
            "SELECT count(*), count(*) FILTER (WHERE status <> 'ok') FROM requests"
        ).fetchone() or (0, 0)
        healths = [json.loads(h) for (h,) in con.execute(
            "SELECT health FROM shard_attempts WHERE health IS NOT NULL").fetchall()]  # fmt: skip
    start, end = stage_windows(db)[0]
    window_s = min(600.0, (end - start) / 3)
    inside = [(t - start, w, p, x) for (t, w, p), x in zip(sampler.samples, sampler.extra_rss,
              strict=True) if start <= t <= end and w and p and x]  # fmt: skip
    last_of_minute = {int(t // 60): (w / MB, p / MB, x / MB) for t, w, p, x in inside}
    per_minute = [(minute, *mbs) for minute, mbs in sorted(last_of_minute.items())]

    # Per minute of the stage: the control plane's RSS less its DuckDB file (MB).
    beyond_file = [(t - start, (plane - size) / MB) for t, plane, size in files
                   if start <= t <= end and plane]  # fmt: skip

    def beyond_change() -> tuple[float, float, float] | None:
        first = [mb for t, mb in beyond_file if t < window_s]
        last = [mb for t, mb in beyond_file if t >= end - start - window_s]
        if not first or not last:
            return None
        a, b = float(np.mean(first)), float(np.mean(last))
        return a, b, (b - a) / a * 100

    def change(column: int) -> tuple[float, float, float]:
        first = [row[column] for row in inside if row[0] < window_s]
        last = [row[column] for row in inside if row[0] >= end - start - window_s]
        a, b = float(np.mean(first)) / MB, float(np.mean(last)) / MB
        return a, b, (b - a) / a * 100

    return {
        "records": int(records),
        "errors": int(errors or 0),
        "not_sent": sum(int(h.get("not_sent") or 0) for h in healths),
        "stage_min": (end - start) / 60,
        "window_min": window_s / 60,
        "per_minute": per_minute,
        "worker": change(1),
        "plane": change(2),
        "simulator": change(3),
        "plane_beyond_file": beyond_change(),
        "file_mb": files[-1][2] / MB if files else 0.0,
        "load": os.getloadavg(),
        "loads": loads,
    }


def per_request_state(requests: int) -> dict[str, float]:
    """Bytes a shard keeps per request in a long stage (tracemalloc, this process): the
    previous per-request int lists (five values a request: schedule lag, send stamp and
    TTFT in the health monitor, intended start and send lag in the open loop) against
    what the shard keeps now (the real ``ShardHealth`` and open-loop structures)."""
    import tracemalloc  # noqa: PLC0415
    from array import array  # noqa: PLC0415

    from workers.client.result import RequestResult  # noqa: PLC0415
    from workers.load.quantiles import LogHistogram  # noqa: PLC0415
    from workers.shard.health import ShardHealth  # noqa: PLC0415

    rng = np.random.default_rng(5)
    sent = (1_700_000_000_000_000_000 + np.cumsum(rng.exponential(2e6, requests))).astype(int)
    lag = rng.lognormal(12, 1, requests).astype(int)
    ttft = rng.lognormal(18, 0.3, requests).astype(int)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    lists: list[list[int]] = [[], [], [], [], []]
    for i in range(requests):
        values = (int(lag[i]), int(sent[i]), int(ttft[i]), int(sent[i] - lag[i]), int(lag[i]))
        for kept, value in zip(lists, values, strict=True):
            kept.append(value)
    old = tracemalloc.get_traced_memory()[0] - before
    del lists
    before = tracemalloc.get_traced_memory()[0]
    health, intended, send_lags = ShardHealth(), array("q"), LogHistogram()
    for i in range(requests):
        start, s, t = int(sent[i] - lag[i]), int(sent[i]), int(ttft[i])
        health.add(RequestResult(intended_start=start, sent=s, end=s + t, token_stamps=[s + t]))
        intended.append(start)
        send_lags.add(int(lag[i]))
    new = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return {"old_b": old / requests, "new_b": new / requests}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--stage-s", type=float, default=20.0, help="per stage of part 1")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rps", type=float, default=500.0)
    parser.add_argument("--minutes", type=float, default=None,
                        help="soak, soak60: length (10; 60 for soak60 alone)")  # fmt: skip
    parser.add_argument("--stages", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--cap", type=int, default=1024, help="soak's max_in_flight")
    parser.add_argument("--streams-10k", type=int, default=10_000)
    parser.add_argument("--tokens-10k", type=int, default=1024)
    parser.add_argument("--itl-ms-10k", type=float, default=500.0)
    parser.add_argument("--ramp-s", type=float, default=50.0, help="10k: arrivals over this")
    parser.add_argument("--parts", nargs="+",
                        default=["state", "streams", "records", "export", "soak"],
                        choices=["state", "streams", "records", "export", "soak", "10k",
                                 "soak60"])  # fmt: skip
    args = parser.parse_args()
    if args.minutes is None:
        args.minutes = 60.0 if args.parts == ["soak60"] else 10.0
    console = Console(width=160)
    with tempfile.TemporaryDirectory(prefix="tb-mem-") as tmp:
        work = Path(tmp)
        if "state" in args.parts:
            requests = round(args.rps * args.minutes * 60)
            row = per_request_state(requests)
            title = (
                f"a shard's per-request state, {requests:,} requests "
                f"({args.rps:.0f} req/s for {args.minutes:g} min, one stage)"
            )
            table = Table(title=title)
            for name in ("kept", "bytes per request", "MB per minute at the rate", "MB in all"):
                table.add_column(name, justify="right")
            for name, key in (("before: int lists", "old_b"), ("now", "new_b")):
                per = row[key]
                table.add_row(name, f"{per:.1f}", f"{per * args.rps * 60 / MB:.2f}",
                              f"{per * requests / MB:.1f}")  # fmt: skip
            console.print(table)
        if "streams" in args.parts:
            with sse_server(50.0, 20.0) as url:
                row = worker_per_streams(url, args.streams, args.stage_s, work)
            table = Table(title=f"worker RSS, 1 stream vs {args.streams} streams (64 tokens)")
            for name in ("1 stream MB", f"{args.streams} streams peak MB", "per 1,000 streams MB"):
                table.add_column(name, justify="right")
            if "failed" in row:
                table.add_row("failed", row["failed"][-60:], "-")
            else:
                table.add_row(f"{row['one_stream_mb']:.1f}", f"{row['peak_mb']:.1f}",
                              f"{row['per_1000_mb']:.1f}")  # fmt: skip
            console.print(table)
            console.print(f"load average {os.getloadavg()}")
        if "records" in args.parts:
            row = control_plane_per_records(args.records, work)
            table = Table(title=f"control-plane ingest RSS, {args.records:,} records (8 ITL gaps)")
            for name in ("after set-up MB", "at the end MB", "peak MB", "per 1M records MB"):
                table.add_column(name, justify="right")
            if "failed" in row:
                table.add_row("failed", row["failed"][-60:], "-", "-")
            else:
                table.add_row(f"{row['start_mb']:.1f}", f"{row['end_mb']:.1f}",
                              f"{row['peak_mb']:.1f}", f"{row['per_1m_mb']:.1f}")  # fmt: skip
                curve = ", ".join(f"{n // 1000}k: {r / MB:.0f}" for n, r in row["curve"])
                console.print(table)
                console.print(f"RSS MB by records stored: {curve}")
            console.print(f"load average {os.getloadavg()}")
        if "export" in args.parts:
            row = export_memory(args.records, work)
            if "failed" in row:
                console.print(f"[red]export failed: {row['failed']}[/red]")
            else:
                table = Table(
                    title=f"control plane exporting a run of {row['records']:,} records "
                    "(GET /v1/runs/{id}/records), peak RSS"
                )
                for name in ("format", "way", "after open MB", "peak MB", "peak − open MB",
                             "answer MB"):  # fmt: skip
                    table.add_column(name, justify="right")
                for (fmt, way), (start, peak, size) in row["rows"].items():
                    table.add_row(fmt, way, f"{start / MB:.0f}", f"{peak / MB:.0f}",
                                  f"{(peak - start) / MB:.0f}", f"{size / MB:.0f}")  # fmt: skip
                console.print(table)
            console.print(f"load average {os.getloadavg()}")
        if "soak" in args.parts:
            results = {}
            for stages in (1, args.stages):
                console.print(f"[dim]soak: {args.rps:.0f} req/s open loop, {args.minutes:g} min "
                              f"in {stages} stage(s) ...[/dim]")  # fmt: skip
                with sse_server(50.0, 20.0) as url:
                    results[stages] = soak(
                        url, args.rps, args.minutes, stages, args.tokens, args.cap, work
                    )
            title = (
                f"soak: {args.rps:.0f} req/s open loop for {args.minutes:g} min, "
                f"{args.tokens} tokens, RSS MB per minute (worker / control plane)"
            )
            table = Table(title=title)
            table.add_column("minute", justify="right")
            for stages in results:
                table.add_column(f"{stages} stage(s)", justify="right")
            longest = max((len(r.get("per_minute", [])) for r in results.values()), default=0)
            for i in range(longest):
                cells = []
                for r in results.values():
                    rows = r.get("per_minute", [])
                    cells.append(f"{rows[i][1]:.1f} / {rows[i][2]:.1f}" if i < len(rows) else "-")
                table.add_row(str(i), *cells)
            table.add_row("slope MB/min (min 2..)", *[
                f"{r['worker_slope']:+.2f} / {r['plane_slope']:+.2f}" if "failed" not in r
                else r["failed"][-40:] for r in results.values()])  # fmt: skip
            for key in ("records", "not_sent", "cap_waits"):
                table.add_row(key, *[str(r.get(key, "-")) for r in results.values()])
            console.print(table)
            console.print(f"load average {os.getloadavg()}")
        if "10k" in args.parts:
            print_10k(console, args, work)
        if "soak60" in args.parts:
            print_soak60(console, args, work)


WORKER_TARGET_MB = 700.0
SOAK_TARGET_PERCENT = 5.0


def print_10k(console: Console, args: argparse.Namespace, work: Path) -> None:
    """Part 5: a worker at ``--streams-10k`` open-loop streams, against the target."""
    streams, tokens, itl_ms = args.streams_10k, args.tokens_10k, args.itl_ms_10k
    # Each process holds one descriptor a stream (the worker's side, the endpoint's)
    # beside the worker's reserve (workers/runtime/fd_budget.py) and what it opens itself.
    refusal = raise_descriptor_limit(streams + 2048)
    console.print(f"[dim]10k: {streams:,} streams arriving over {args.ramp_s:g} s, "
                  f"{tokens} tokens at {itl_ms:g} ms ...[/dim]")  # fmt: skip
    if refusal is not None:
        row: dict[str, Any] = {"failed": refusal}
    else:
        with sse_server(50.0, itl_ms) as url:
            row = worker_at_10k(url, streams, tokens, itl_ms, args.ramp_s, work)
    if "failed" in row:
        console.print(f"[red]10k failed: {row['failed']}[/red]")
        return
    events_per_s = streams / (itl_ms / 1000)
    title = (
        f"a worker at {streams:,} open-loop streams: {row['rps']:.0f} req/s (constant) for "
        f"{args.ramp_s:g} s, answers of {tokens:,} tokens at {itl_ms:g} ms ITL "
        f"(~{row['stream_s']:.0f} s a stream, ~{events_per_s:,.0f} token events/s at "
        f"{streams:,}), endpoint tests/fakes/sse_server.py"
    )
    table = Table(title=title)
    for name in ("before the first send MB", "peak RSS MB", "target MB", "in flight at the peak",
                 "most in flight", "worker fds (peak)", "records", "errors", "token events",
                 "endpoint lateness p99 / max ms"):  # fmt: skip
        table.add_column(name, justify="right")
    late = row["lateness"]
    verdict = "[green]met[/green]" if row["peak_mb"] <= WORKER_TARGET_MB else "[red]missed[/red]"
    table.add_row(
        f"{row['before_mb']:.1f}", f"{row['peak_mb']:.1f}",
        f"{WORKER_TARGET_MB:.0f} ({verdict})", f"{row['in_flight_at_peak']:,}",
        f"{row['most_in_flight']:,}", f"{row['peak_fds']:,}", f"{row['records']:,}",
        f"{row['errors']:,}", f"{row['token_events']:,}",
        f"{late.get('p99_ms', 0):.1f} / {late.get('max_ms', 0):.1f}",
    )  # fmt: skip
    console.print(table)
    curve = ", ".join(f"{t}s: {mb:.0f}/{n:,}" for t, mb, n in row["curve"])
    console.print(f"RSS MB / streams in flight, by seconds from the first send: {curve}")
    console.print(f"load average at the end {row['load']}")


def print_soak60(console: Console, args: argparse.Namespace, work: Path) -> None:
    """Part 6: the soak against the simulator, first against last window."""
    console.print(f"[dim]soak60: {args.rps:.0f} req/s open loop for {args.minutes:g} min "
                  f"against tokenbench simulate ...[/dim]")  # fmt: skip
    row = soak_simulator(args.rps, args.minutes, args.tokens, args.cap, work, console)
    if "failed" in row:
        console.print(f"[red]soak60 failed: {row['failed']}[/red]")
        return
    console.print(
        f"soak against tokenbench simulate (50 ms TTFT, 20 ms ITL): {args.rps:.0f} req/s open "
        f"loop (Poisson), {args.tokens} tokens, at most {args.cap:,} in flight, one stage of "
        f"{row['stage_min']:.1f} min"
    )
    table = Table(title="RSS MB at each minute's end")
    for name in ("minute", "worker", "control plane", "simulator"):
        table.add_column(name, justify="right")
    for minute, worker, plane, sim in row["per_minute"]:
        table.add_row(str(minute), f"{worker:.1f}", f"{plane:.1f}", f"{sim:.1f}")
    console.print(table)
    window = row["window_min"]
    summary = Table(
        title=f"mean RSS, first {window:.1f} min against last {window:.1f} min "
        f"(target: within {SOAK_TARGET_PERCENT:g} %)"
    )
    for name in ("process", "first MB", "last MB", "change"):
        summary.add_column(name, justify="right")
    for name in ("worker", "plane", "simulator"):
        first, last, percent = row[name]
        met = abs(percent) <= SOAK_TARGET_PERCENT
        mark = "" if name == "simulator" else (" [green]met" if met else " [red]missed")
        label = "control plane" if name == "plane" else name
        summary.add_row(label, f"{first:.1f}", f"{last:.1f}", f"{percent:+.1f} %{mark}")
    if row["plane_beyond_file"] is not None:
        first, last, percent = row["plane_beyond_file"]
        summary.add_row("control plane less its DuckDB file", f"{first:.1f}", f"{last:.1f}",
                        f"{percent:+.1f} %")  # fmt: skip
    console.print(summary)
    console.print(f"the DuckDB file at the end: {row['file_mb']:.1f} MB (DuckDB keeps the "
                  "blocks it wrote cached up to its memory_limit)")  # fmt: skip
    loads = row["loads"] or [row["load"][0]]
    limit = os.environ.get("TOKENBENCH__DUCKDB__MEMORY_LIMIT")
    console.print(f"records {row['records']:,}, errors {row['errors']:,}, not sent "
                  f"{row['not_sent']:,}; load average (1 min) while it ran "
                  f"{min(loads):.1f}–{max(loads):.1f}; the control plane's DuckDB "
                  f"memory_limit: {limit or 'unset (DuckDB: 80 % of RAM)'}")  # fmt: skip


if __name__ == "__main__":
    main()
