"""Heavy work of the REST control plane: off its event loop, a bounded number at once.

The control plane is one process whose event loop answers every request (``/healthz``
included) and drives the runs' control loop. Anything that takes more than a few
milliseconds of CPU — the view of a 10,000-shard run, a report, a trend, a shadow
comparison, parsing an uploaded dataset or scenario — runs in one of
``api.heavy_requests`` threads instead (:class:`HeavyWork`, one per application,
shared by every such route). A request that finds every slot taken waits up to
``api.heavy_wait_s``, then is answered 503 with ``Retry-After`` (:class:`Busy`): the
queue is bounded by that wait, not by memory or by how many clients ask.

A slot is held until its thread finishes, even when the client has gone away (a
cancelled request cannot stop a thread), so at most ``heavy_requests`` threads ever
work at once. Threads still share the GIL with the event loop: a few CPU-bound threads
delay it by a few switch intervals (5 ms each), not by their whole work.

DuckDB: a connection must not be used by two threads at once (its docs: "a single
DuckDB connection is not thread-safe", one ``cursor()`` per thread), so work on the
database gets a cursor of its own, made on the loop and closed by its thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Concatenate, ParamSpec, TypeVar

import duckdb
from fastapi import Response
from pydantic import BaseModel

from api.rest.errors import Busy

P = ParamSpec("P")
T = TypeVar("T")

JSON = "application/json"


class HeavyWork:
    """``slots`` threads for heavy work; a caller waits up to ``wait_s`` for one."""

    def __init__(self, slots: int, wait_s: float) -> None:
        self.slots = slots
        self.wait_s = wait_s
        self._free = asyncio.Semaphore(slots)
        self._executor = ThreadPoolExecutor(max_workers=slots, thread_name_prefix="heavy")
        self.busy = 0  # slots taken now (their threads may outlive their requests)

    @property
    def retry_after_s(self) -> int:
        """What a refused client is told to wait: the time it waited, at least a second."""
        return max(1, math.ceil(self.wait_s))

    async def run(self, what: str, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``fn(*args, **kwargs)`` in a heavy-work thread, once a slot is free; Busy
        (503) if none frees within ``wait_s``. ``what`` names the work for the message."""
        await self._acquire(what)
        return await self._submit(fn, *args, **kwargs)

    async def on_cursor(
        self,
        what: str,
        con: duckdb.DuckDBPyConnection,
        fn: Callable[Concatenate[duckdb.DuckDBPyConnection, P], T],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """``fn(cursor, *args, **kwargs)`` in a heavy-work thread, on a cursor of ``con``
        of its own: made once a slot is free (a waiting request holds none), on the
        loop's thread, which owns ``con`` (as the control loop makes its own), and
        closed by the thread when ``fn`` returns."""
        await self._acquire(what)
        try:
            cursor = con.cursor()
        except BaseException:
            self._release()
            raise

        def work() -> T:
            try:
                return fn(cursor, *args, **kwargs)
            finally:
                cursor.close()

        return await self._submit(work)

    async def _acquire(self, what: str) -> None:
        try:
            async with asyncio.timeout(self.wait_s):
                await self._free.acquire()
        except TimeoutError:
            raise Busy(what, self.wait_s, self.retry_after_s) from None
        self.busy += 1

    async def _submit(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run ``fn`` on a slot already taken; the slot is given back when it ends."""
        loop = asyncio.get_running_loop()

        def release(_: Future[T]) -> None:
            # From the worker thread (or here, if cancelled before it started).
            with contextlib.suppress(RuntimeError):  # the loop is closed: nothing to free
                loop.call_soon_threadsafe(self._release)

        try:
            future = self._executor.submit(fn, *args, **kwargs)
        except BaseException:
            self._release()
            raise
        future.add_done_callback(release)
        # Cancelling the request (the client went away) cancels this wait, not the
        # thread: its slot is freed when the thread ends, so the bound holds however
        # many clients give up.
        return await asyncio.wrap_future(future)

    def _release(self) -> None:
        self.busy -= 1
        self._free.release()

    def close(self) -> None:
        """Let running work finish, drop what has not started (application shutdown)."""
        self._executor.shutdown(wait=True, cancel_futures=True)


def json_response(model: BaseModel, status_code: int = 200) -> Response:
    """``model`` encoded as JSON, as a finished answer: built in the heavy-work thread,
    FastAPI then sends it as is instead of validating and encoding it on the loop (for
    a 10,000-shard run view, ~2 MB of JSON)."""
    return Response(model.model_dump_json(), status_code=status_code, media_type=JSON)
