"""One long-lived asyncio event loop per worker process, running in a daemon thread.

Celery tasks are synchronous; each hands its coroutine to this loop and waits. The loop,
its HTTP client, Redis connections and simulated endpoints live as long as the process,
so connections are reused across shards (no ``asyncio.run`` per task). The loop is
created lazily and re-created in a forked child, whose inherited thread does not exist.
:data:`shutting_down` tells running shards that the worker is stopping. Creating the
loop is the end of start-up (the first task arrived, every module is imported): the
garbage collector is tuned then (``workers/runtime/gc_tuning.py``).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from scenarios.settings import get_settings
from workers.runtime import gc_tuning

T = TypeVar("T")

_lock = threading.Lock()
_state: tuple[int, asyncio.AbstractEventLoop] | None = None

# Set when the worker starts shutting down (SIGTERM, Ctrl-C): running shards stop
# sending, publish the records they have, and are re-dispatched by the control plane.
shutting_down = threading.Event()


def new_loop() -> asyncio.AbstractEventLoop:
    """A uvloop event loop where available, else asyncio's default."""
    try:
        import uvloop  # noqa: PLC0415 - optional accelerator

        return uvloop.new_event_loop()
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux/macOS
        return asyncio.new_event_loop()


def get_loop() -> asyncio.AbstractEventLoop:
    """This process's worker loop, started on first use."""
    global _state  # noqa: PLW0603 - one loop per process is the point
    with _lock:
        if _state is None or _state[0] != os.getpid():
            loop = new_loop()
            ready = threading.Event()

            def run() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()

            threading.Thread(target=run, name="tokenbench-loop", daemon=True).start()
            ready.wait()
            _state = (os.getpid(), loop)
            gc_tuning.tune(get_settings().worker.gc_tuning)
        return _state[1]


def run_in_loop(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run ``coro`` on the worker loop from a synchronous caller and return its result."""
    future = asyncio.run_coroutine_threadsafe(coro, get_loop())
    try:
        return future.result(timeout)
    except BaseException:
        future.cancel()
        raise
