"""A local run's simulated upstreams: started at their fixed loopback ports, their logs
read into the run's DuckDB file while it goes on (docs/failover.md).

Each upstream is the simulator's own process (``python -m workers.simulator``) on
``127.0.0.1:PORT``, exiting with this process even if it is killed. A port that is
taken is refused before anything starts, naming the scenario field. While the run goes
on, :class:`UpstreamCollector` reads every upstream's new log entries each second (its
log is bounded, so a long run must not wait for the end) on a cursor of its own, so its
writes never join a transaction of the control plane's ingest.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

import duckdb
import httpx

from analytics.store.upstream_log import store_upstream_entries, store_upstream_summary
from scenarios.errors import BadInput
from scenarios.limits import MAX_REQUEST_LOG_PAGE
from scenarios.providers.upstreams import UPSTREAM_HOST, Upstream
from workers.simulator.process import READY_PREFIX

__all__ = ["UpstreamCollector", "local_upstreams"]

READY_TIMEOUT_S = 30.0
POLL_S = 1.0
MAX_FAILURES_KEPT = 20


def _check_port_free(index: int, upstream: Upstream) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # As the simulator's own listener binds (asyncio sets it): connections of an
        # earlier server in TIME_WAIT do not make the port taken, a listener does.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((UPSTREAM_HOST, upstream.port))
        except OSError as exc:
            raise BadInput(
                f"upstreams.{index}.port: {UPSTREAM_HOST}:{upstream.port} cannot be used for "
                f"upstream {upstream.name!r}: {exc.strerror}"
            ) from None


def _start(upstream: Upstream, log: IO[bytes]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable, "-m", "workers.simulator",
            "--spec-json", upstream.simulate.model_dump_json(),
            "--model", upstream.model,
            "--host", UPSTREAM_HOST,
            "--port", str(upstream.port),
            "--parent-pid", str(os.getpid()),
        ],
        stdout=subprocess.PIPE,
        stderr=log,  # a file, not a pipe: nobody reads it while the run goes on
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def _await_ready(upstream: Upstream, process: subprocess.Popen[bytes], log: IO[bytes]) -> None:
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], READY_TIMEOUT_S)
    line = process.stdout.readline() if ready else b""  # the line is written whole
    if line.decode(errors="replace").startswith(READY_PREFIX):
        return
    process.kill()
    process.wait()
    log.seek(0)
    said = log.read()[-2000:].decode(errors="replace").strip()
    raise RuntimeError(
        f"upstream {upstream.name!r} did not start within {READY_TIMEOUT_S:g} s"
        if not ready
        else f"upstream {upstream.name!r} failed to start: {said or line!r}"
    )


@contextlib.contextmanager
def local_upstreams(upstreams: list[Upstream]) -> Iterator[list[Upstream]]:
    """Start ``upstreams`` (BadInput naming the field when a port is taken, RuntimeError
    when one fails to start) and stop them on exit."""
    for index, upstream in enumerate(upstreams):
        _check_port_free(index, upstream)
    processes: list[subprocess.Popen[bytes]] = []
    with contextlib.ExitStack() as files:
        try:
            for upstream in upstreams:
                log = files.enter_context(tempfile.TemporaryFile())
                process = _start(upstream, log)
                processes.append(process)
                _await_ready(upstream, process, log)
            yield upstreams
        finally:
            _stop(processes)


def _stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
        if process.stdout is not None:
            process.stdout.close()


@dataclass
class _Cursor:
    after: int = 0
    missed: int = 0
    started_at_ns: int | None = None


class UpstreamCollector:
    """Reads the upstreams' logs into ``upstream_requests`` of run ``run_id``."""

    def __init__(
        self, upstreams: list[Upstream], con: duckdb.DuckDBPyConnection, run_id: str
    ) -> None:
        self.upstreams = upstreams
        self.con = con
        self.run_id = run_id
        self._cursors = {u.name: _Cursor() for u in upstreams}
        self._stop = asyncio.Event()
        self.failures: list[str] = []

    async def read(self, http: httpx.AsyncClient) -> None:
        """Store every entry logged since the last read (page by page)."""
        for upstream in self.upstreams:
            cursor = self._cursors[upstream.name]
            while True:
                try:
                    answer = await http.get(
                        f"http://{UPSTREAM_HOST}:{upstream.port}/tokenbench/requests",
                        params={"after": cursor.after, "limit": MAX_REQUEST_LOG_PAGE},
                    )
                    answer.raise_for_status()
                    page = answer.json()
                except (httpx.HTTPError, ValueError) as exc:
                    if len(self.failures) < MAX_FAILURES_KEPT:
                        self.failures.append(f"upstream {upstream.name!r}: log not read: {exc}")
                    break
                entries = page["entries"]
                # Entries dropped from the bounded log before this read reached them.
                if page["oldest"] > cursor.after + 1:
                    cursor.missed += page["oldest"] - cursor.after - 1
                store_upstream_entries(self.con, self.run_id, upstream.name, entries)
                cursor.started_at_ns = page["started_at_ns"]
                cursor.after = entries[-1]["seq"] if entries else max(cursor.after, page["last"])
                if len(entries) < MAX_REQUEST_LOG_PAGE:
                    break

    async def follow(self) -> None:
        """Read every :data:`POLL_S` until :meth:`finish`."""
        async with httpx.AsyncClient(timeout=10) as http:
            while not self._stop.is_set():
                await self.read(http)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), POLL_S)

    async def finish(self, follower: asyncio.Task[None] | None) -> None:
        """Stop following, read what is left, write each upstream's summary row."""
        self._stop.set()
        if follower is not None:
            await follower
        async with httpx.AsyncClient(timeout=10) as http:
            await self.read(http)
        for upstream in self.upstreams:
            cursor = self._cursors[upstream.name]
            store_upstream_summary(
                self.con,
                self.run_id,
                upstream.name,
                upstream.port,
                cursor.missed,
                cursor.started_at_ns,
            )
        self.con.close()
