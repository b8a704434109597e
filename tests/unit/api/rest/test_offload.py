"""The heavy-work limiter: a bounded number of threads, a bounded wait, then 503."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import duckdb
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import BaseModel

from api.rest.errors import Busy, install_error_handlers
from api.rest.offload import HeavyWork, json_response

WAIT_S = 5.0  # generous: only reached when the test fails


def test_work_runs_off_the_loop_thread_and_gives_its_answer_back() -> None:
    async def main() -> tuple[int, int]:
        heavy = HeavyWork(2, WAIT_S)
        return threading.get_ident(), await heavy.run("work", threading.get_ident)

    loop_thread, work_thread = asyncio.run(main())
    assert work_thread != loop_thread


def test_a_request_finding_every_slot_taken_is_refused_busy_after_its_wait() -> None:
    release = threading.Event()

    async def main() -> tuple[Busy, int]:
        heavy = HeavyWork(1, 0.05)
        first = asyncio.create_task(heavy.run("first", release.wait, WAIT_S))
        while heavy.busy == 0:
            await asyncio.sleep(0.01)
        with pytest.raises(Busy) as refused:
            await heavy.run("a run's view", lambda: None)
        release.set()
        await first
        after = await heavy.run("again", lambda: 7)  # the slot came back
        return refused.value, after

    refused, after = asyncio.run(main())
    assert refused.retry_after_s == 1 and "a run's view waited 0.05 s" in str(refused)
    assert after == 7


def test_a_request_given_up_keeps_its_slot_until_its_thread_ends() -> None:
    """A client that goes away cannot free a slot its thread still works in: the bound
    holds however many clients give up."""
    release = threading.Event()

    async def main() -> tuple[int, bool, int]:
        heavy = HeavyWork(1, 0.05)
        abandoned = asyncio.create_task(heavy.run("abandoned", release.wait, WAIT_S))
        while heavy.busy == 0:
            await asyncio.sleep(0.01)
        abandoned.cancel()
        await asyncio.gather(abandoned, return_exceptions=True)
        busy_after_cancel = heavy.busy
        try:
            await heavy.run("next", lambda: None)
            refused = False
        except Busy:
            refused = True
        release.set()
        while heavy.busy:
            await asyncio.sleep(0.01)
        return busy_after_cancel, refused, heavy.busy

    busy_after_cancel, refused, busy_at_end = asyncio.run(main())
    assert (busy_after_cancel, refused, busy_at_end) == (1, True, 0)


def test_work_on_a_cursor_gets_its_own_and_closes_it(tmp_path: Path) -> None:
    con = duckdb.connect(str(tmp_path / "db.duckdb"))
    con.execute("CREATE TABLE t AS SELECT 42 AS x")
    used: list[duckdb.DuckDBPyConnection] = []

    def read(cursor: duckdb.DuckDBPyConnection, table: str) -> int:
        used.append(cursor)
        row = cursor.execute(f"SELECT x FROM {table}").fetchone()
        return int(row[0]) if row else -1

    async def main() -> int:
        return await HeavyWork(1, WAIT_S).on_cursor("read", con, read, "t")

    assert asyncio.run(main()) == 42
    assert used[0] is not con
    with pytest.raises(duckdb.ConnectionException):
        used[0].execute("SELECT 1")  # closed by its thread
    con.close()


class Answer(BaseModel):
    value: int


def test_busy_is_a_503_with_retry_after_and_a_json_answer_is_sent_as_built() -> None:
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/busy")
    async def busy() -> None:
        raise Busy("a run's view", 10.0, 10)

    @app.get("/answer")
    async def answer() -> object:
        return json_response(Answer(value=3))

    client = TestClient(app)
    refused = client.get("/busy")
    assert refused.status_code == 503
    assert refused.headers["retry-after"] == "10"
    assert refused.json()["error"] == "unavailable" and refused.json()["retry_after_s"] == 10
    ok = client.get("/answer")
    assert ok.json() == {"value": 3} and ok.headers["content-type"] == "application/json"
