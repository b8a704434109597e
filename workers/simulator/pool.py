"""The simulated endpoints of one worker process: started on demand, shared, bounded.

Each distinct ``simulate`` configuration (with its model) is served by one child process
(``workers/simulator/process.py``, ~95 MB). Shards hold an endpoint for as long as they
run (:meth:`SimulatorPool.lease`, a reference count); an endpoint no shard holds is
stopped once it has been idle for ``idle_s`` (``worker.simulator_idle_s``), or at once
when a new configuration needs its place under the cap, and every endpoint is stopped
when the pool closes (worker shutdown). At most ``max_processes``
(``worker.max_simulators``) run at once: a shard that would need one more while all are
in use fails with :class:`SimulatorCapReached` naming the cap. A stopped endpoint is
started again on its next use.

The pool announces each endpoint's exact address and port to the egress guard
(``on_start``) and withdraws it when the endpoint stops (``on_stop``): a port freed by a
stopped simulator may be bound by anything next, and the policy decides for it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from scenarios.providers.base import ProviderBase
from scenarios.providers.kinds import SimulatedProvider
from scenarios.settings import env_name
from workers.simulator.process import FAILED_PREFIX, HOST, READY_PREFIX

__all__ = [
    "DEFAULT_IDLE_S",
    "DEFAULT_MAX_PROCESSES",
    "SimulatorCapReached",
    "SimulatorPool",
    "idle_to_stop",
]

DEFAULT_IDLE_S = 60.0
DEFAULT_MAX_PROCESSES = 8
# Seconds a simulator gets to start (print its ready line), and to exit when told.
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 5.0

AddressHook = Callable[[str, int], None]


class SimulatorCapReached(RuntimeError):
    """Every simulator process this worker may run is in use by a running shard."""


@dataclass
class _Endpoint:
    """One running simulator process and the shards using it."""

    process: asyncio.subprocess.Process
    port: int
    users: int = 0
    idle_since: float = 0.0  # time.monotonic() when ``users`` last dropped to 0

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}/v1"

    @property
    def alive(self) -> bool:
        return self.process.returncode is None


def idle_to_stop(
    endpoints: dict[str, tuple[int, float]], now: float, idle_s: float, room_needed: int
) -> list[str]:
    """Keys of the endpoints to stop: every unused one idle for ``idle_s`` or longer,
    plus the longest-idle unused ones until ``room_needed`` more are stopped (to make
    room under the cap). ``endpoints``: key -> (users, idle_since)."""
    unused = sorted(
        (since, key) for key, (users, since) in endpoints.items() if users == 0
    )  # longest idle first
    expired = [key for since, key in unused if now - since >= idle_s]
    extra = [key for _, key in unused if key not in expired][: max(room_needed - len(expired), 0)]
    return expired + extra


class SimulatorPool:
    """The simulated endpoints of one worker process, one per distinct configuration."""

    def __init__(
        self,
        on_start: AddressHook | None = None,
        on_stop: AddressHook | None = None,
        idle_s: float | None = DEFAULT_IDLE_S,
        max_processes: int = DEFAULT_MAX_PROCESSES,
    ) -> None:
        """``idle_s`` None: unused endpoints are kept until :meth:`close` (a gateway's
        fixed set of targets)."""
        self._endpoints: dict[str, _Endpoint] = {}
        self._lock = asyncio.Lock()
        self._on_start = on_start
        self._on_stop = on_stop
        self.idle_s = idle_s
        self.max_processes = max_processes
        self._reaper: asyncio.Task[None] | None = None
        # Terminations under way: a cancelled caller (the reaper, when the pool closes)
        # leaves its shielded termination running; close() waits for every one, so no
        # simulator outlives its pool.
        self._stopping: set[asyncio.Task[None]] = set()

    @property
    def running(self) -> int:
        """Simulator processes running now."""
        return sum(1 for endpoint in self._endpoints.values() if endpoint.alive)

    @contextlib.asynccontextmanager
    async def lease(self, provider: ProviderBase) -> AsyncIterator[str | None]:
        """Hold ``provider``'s endpoint for the block: its base URL if it is simulated
        (started if needed), else None (the scenario names every other provider's URL).
        Raises SimulatorCapReached when a new process would exceed the cap."""
        if not isinstance(provider, SimulatedProvider):
            yield None
            return
        key, endpoint = await self._acquire(provider)
        try:
            yield endpoint.url
        finally:
            self._release(key, endpoint)

    async def base_url(self, provider: SimulatedProvider) -> str:
        """Base URL (``http://127.0.0.1:PORT/v1``) of ``provider``'s endpoint, held until
        :meth:`close` (for a gateway, whose targets live as long as it does)."""
        _, endpoint = await self._acquire(provider)
        return endpoint.url

    async def close(self) -> None:
        """Stop every endpoint this pool started."""
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
            self._reaper = None
        async with self._lock:
            for key in list(self._endpoints):
                await self._stop(key)
        if self._stopping:
            await asyncio.gather(*self._stopping, return_exceptions=True)

    async def _acquire(self, provider: SimulatedProvider) -> tuple[str, _Endpoint]:
        key = provider.simulate.model_dump_json() + "\n" + provider.model
        async with self._lock:
            known = self._endpoints.get(key)
            if known is not None and known.alive:
                known.users += 1
                return key, known
            if known is not None:  # died (or was killed): start it again below
                await self._stop(key)
            await self._make_room()
            endpoint = await _start(provider)
            endpoint.users = 1
            self._endpoints[key] = endpoint
            if self._on_start is not None:
                self._on_start(HOST, endpoint.port)
            return key, endpoint

    async def _make_room(self) -> None:
        """Stop dead endpoints, then idle ones until one more fits under the cap."""
        for key in [key for key, endpoint in self._endpoints.items() if not endpoint.alive]:
            await self._stop(key)
        over = len(self._endpoints) + 1 - self.max_processes
        if over <= 0:
            return
        state = {key: (e.users, e.idle_since) for key, e in self._endpoints.items()}
        for key in idle_to_stop(state, time.monotonic(), float("inf"), over):
            await self._stop(key)
        if len(self._endpoints) >= self.max_processes:
            raise SimulatorCapReached(
                f"this worker already runs {len(self._endpoints)} simulated endpoints, all in "
                f"use by running shards: the cap is {self.max_processes} simulator processes "
                f"per worker process ({env_name('worker.max_simulators')}); run fewer distinct "
                "simulate configurations at once"
            )

    def _release(self, key: str, endpoint: _Endpoint) -> None:
        endpoint.users -= 1
        if endpoint.users > 0 or self._endpoints.get(key) is not endpoint:
            return
        endpoint.idle_since = time.monotonic()
        if self.idle_s is not None and (self._reaper is None or self._reaper.done()):
            self._reaper = asyncio.get_running_loop().create_task(self._reap(self.idle_s))

    async def _reap(self, idle_s: float) -> None:
        """Stop endpoints idle for ``idle_s``; runs while any endpoint is unused."""
        while True:
            async with self._lock:
                now = time.monotonic()
                state = {key: (e.users, e.idle_since) for key, e in self._endpoints.items()}
                for key in idle_to_stop(state, now, idle_s, 0):
                    await self._stop(key)
                unused = [e.idle_since for e in self._endpoints.values() if e.users == 0]
            if not unused:
                return
            await asyncio.sleep(max(min(unused) + idle_s - time.monotonic(), 0.05))

    async def _stop(self, key: str) -> None:
        """Stop one endpoint and withdraw its address (called with the lock held)."""
        endpoint = self._endpoints.pop(key)
        if self._on_stop is not None:
            self._on_stop(HOST, endpoint.port)
        # Shielded: a cancelled reaper (the pool closing) still sees the process reaped,
        # and close() waits for it.
        stopping = asyncio.ensure_future(_terminate(endpoint.process))
        self._stopping.add(stopping)
        stopping.add_done_callback(self._stopping.discard)
        await asyncio.shield(stopping)


async def _start(provider: SimulatedProvider) -> _Endpoint:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "workers.simulator",
        "--spec-json",
        provider.simulate.model_dump_json(),
        "--model",
        provider.model,
        "--parent-pid",
        str(os.getpid()),
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        port = await _await_ready(process)
    except BaseException:
        await _terminate(process)
        raise
    return _Endpoint(process, port)


async def _terminate(process: asyncio.subprocess.Process) -> None:
    """SIGTERM, then SIGKILL if it has not exited within STOP_TIMEOUT_S; reaped either way."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        try:
            await asyncio.wait_for(process.wait(), STOP_TIMEOUT_S)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
    else:
        await process.wait()


async def _await_ready(process: asyncio.subprocess.Process) -> int:
    assert process.stdout is not None
    try:
        line = await asyncio.wait_for(process.stdout.readline(), START_TIMEOUT_S)
    except TimeoutError:
        raise RuntimeError(
            f"simulated endpoint did not start within {START_TIMEOUT_S:.0f} s"
        ) from None
    text = line.decode().strip()
    if text.startswith(FAILED_PREFIX):
        raise RuntimeError(
            f"simulated endpoint failed to start: {text.removeprefix(FAILED_PREFIX)}"
        )
    if not text.startswith(READY_PREFIX):
        raise RuntimeError(f"simulated endpoint failed to start (said {text!r})")
    return int(text.removeprefix(READY_PREFIX))
