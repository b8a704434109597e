"""Fault tests: real processes around a Redis of their own, which a test may kill.

Each test gets a fresh Redis (with an append-only file, like a production Redis) so that
killing it touches nothing else; the helpers start a control plane and workers on it and
count what a run planned, recorded and failed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest

from api.local.redis_server import RedisServer, start_redis_server
from tests.conftest import API_TOKEN, Proc, start_control_plane, start_worker

MISSING = re.compile(r"(\d+) of (\d+) requests missing")


def scenario(
    region: str, requests: int, concurrency: list[int], itl_ms: float = 5
) -> dict[str, Any]:
    """A closed-loop run on the worker's simulated endpoint, slow enough to be killed in."""
    return {
        "name": "fault",
        "providers": [
            {"name": "sim", "kind": "simulated", "simulate": {"ttft_ms": 30, "itl_ms": itl_ms}}
        ],
        "workload": {
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": 8},
                    "output_tokens": {"dist": "fixed", "value": 20},
                }
            ]
        },
        "load": {"concurrency": concurrency, "requests_per_level": requests},
        "regions": [region],
    }


@dataclass
class Counts:
    """What a finished run planned, recorded (accepted attempts) and explicitly failed."""

    state: str
    planned: int
    recorded: int
    missing: int  # the sum of "N of M requests missing" in failed shards' messages
    attempts: list[tuple[str, int, str, str | None]]  # shard, attempt, state, message

    def __str__(self) -> str:
        return f"{self.state}: planned {self.planned}, recorded {self.recorded}, missing {self.missing}"


@dataclass
class FaultStack:
    """A Redis that can be killed, with a control plane and workers on it."""

    redis: RedisServer
    tmp: Path
    env: dict[str, str]
    procs: list[Proc] = field(default_factory=list)
    db: Path | None = None
    base: str = ""

    def worker(self, region: str, name: str = "worker", **env: str) -> Proc:
        proc = start_worker(region, {**self.env, **env}, self.tmp / f"{name}.log", self.redis.url)
        self.procs.append(proc)
        return proc

    def control_plane(self, **env: str) -> httpx.Client:
        self.db = self.tmp / "runs.duckdb"
        proc, self.base = start_control_plane({**self.env, **env}, self.db, self.tmp / "api.log")
        self.procs.append(proc)
        return httpx.Client(
            base_url=self.base, headers={"authorization": f"Bearer {API_TOKEN}"}, timeout=30
        )

    def logs(self) -> str:
        return "\n".join(f"--- {p.log.name}\n{p.text()[-3000:]}" for p in self.procs)

    def counts(self, run_id: str) -> Counts:
        """Read once the control plane has stopped (DuckDB allows one writer process)."""
        assert self.db is not None
        con = duckdb.connect(str(self.db), read_only=True)
        try:
            (state,) = con.execute(
                "SELECT state FROM runs WHERE run_id = ?", [run_id]
            ).fetchone() or ("?",)
            planned = con.execute(
                "SELECT sum(planned_requests) FROM shards WHERE run_id = ?", [run_id]
            ).fetchone()
            recorded = con.execute(
                "SELECT count(*) FROM requests WHERE run_id = ?", [run_id]
            ).fetchone()
            messages = con.execute(
                "SELECT message FROM shards WHERE run_id = ? AND state = 'failed'", [run_id]
            ).fetchall()
            attempts = con.execute(
                "SELECT shard_id, attempt, state, message FROM shard_attempts WHERE run_id = ? "
                "ORDER BY shard_id, attempt",
                [run_id],
            ).fetchall()
        finally:
            con.close()
        missing = 0
        for (message,) in messages:
            found = MISSING.search(message or "")
            assert found, f"a failed shard does not say how many requests are missing: {message!r}"
            missing += int(found.group(1))
        return Counts(str(state), int(planned[0]), int(recorded[0]), missing, attempts)

    def stop(self) -> None:
        for proc in reversed(self.procs):
            proc.stop(3 if "worker" in proc.log.name else 15)


@pytest.fixture
def fault_stack(tmp_path: Path) -> Iterator[FaultStack]:
    """A persistent Redis of this test's own; everything started on it is stopped after."""
    server = start_redis_server(persistent=True)
    env = {
        **os.environ,
        "TOKENBENCH__REDIS__URL": server.url,
        "TOKENBENCH__EGRESS__ALLOW_LOOPBACK": "true",
        "TOKENBENCH__WORKER__HEARTBEAT_S": "1",
    }
    stack = FaultStack(server, tmp_path, env)
    try:
        yield stack
    finally:
        stack.stop()
        server.kill()
        server.stop()
