"""Running simulated endpoints as their own processes.

A simulated provider is served by a separate process on loopback so that its timers
never share an event loop (or a GIL) with the measuring client. Workers start one per
distinct ``simulate`` configuration and keep it for their lifetime; the child exits by
itself when its parent dies, even by SIGKILL. The pool announces each endpoint's exact
address and port (``on_endpoint``) so that the worker's egress guard trusts it even
where loopback is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Callable

from scenarios.model import SimulatedProvider, SimulateSpec
from scenarios.providers import ProviderBase
from workers.simulator.server import SimulatorApp, start_server

READY_PREFIX = "TOKENBENCH_SIMULATOR_READY port="
HOST = "127.0.0.1"


async def serve(
    spec: SimulateSpec,
    model: str,
    host: str = "127.0.0.1",
    port: int = 0,
    parent_pid: int | None = None,
) -> None:
    """Serve until cancelled (or until ``parent_pid`` is gone); prints the ready line."""
    server = await start_server(SimulatorApp(spec, model), host, port)
    bound = server.sockets[0].getsockname()[1]
    print(f"{READY_PREFIX}{bound}", flush=True)
    async with server:
        if parent_pid is None:
            await server.serve_forever()
        else:
            while _alive(parent_pid):
                await asyncio.sleep(0.5)


def run(spec: SimulateSpec, model: str, host: str, port: int, parent_pid: int | None) -> None:
    """Blocking entry point: serve on the fastest available event loop."""
    from workers.event_loop import new_loop  # noqa: PLC0415 - avoid a cycle at import

    with contextlib.suppress(KeyboardInterrupt), asyncio.Runner(loop_factory=new_loop) as runner:
        runner.run(serve(spec, model, host, port, parent_pid))


def _alive(pid: int) -> bool:
    if os.getppid() != pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class SimulatorPool:
    """The simulated endpoints of one worker process, one per distinct configuration."""

    def __init__(self, on_endpoint: Callable[[str, int], None] | None = None) -> None:
        self._endpoints: dict[str, tuple[asyncio.subprocess.Process, str]] = {}
        self._lock = asyncio.Lock()
        self._on_endpoint = on_endpoint

    async def endpoint_of(self, provider: ProviderBase) -> str | None:
        """Base URL of ``provider``'s endpoint if it is simulated (started on first use),
        else None: the scenario names every other provider's URL itself."""
        return await self.base_url(provider) if isinstance(provider, SimulatedProvider) else None

    async def base_url(self, provider: SimulatedProvider) -> str:
        """Base URL (``http://127.0.0.1:PORT/v1``) of the endpoint for ``provider``."""
        key = provider.simulate.model_dump_json() + provider.model
        async with self._lock:
            known = self._endpoints.get(key)
            if known is not None and known[0].returncode is None:
                return known[1]
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
            port = await _await_ready(process)
            if self._on_endpoint is not None:
                self._on_endpoint(HOST, port)
            url = f"http://{HOST}:{port}/v1"
            self._endpoints[key] = (process, url)
            return url

    async def close(self) -> None:
        """Stop every endpoint this pool started."""
        for process, _ in self._endpoints.values():
            if process.returncode is None:
                process.terminate()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(process.wait(), 5)
        self._endpoints.clear()


async def _await_ready(process: asyncio.subprocess.Process) -> int:
    assert process.stdout is not None
    try:
        line = await asyncio.wait_for(process.stdout.readline(), 30)
    except TimeoutError:
        process.kill()
        raise RuntimeError("simulated endpoint did not start within 30 s") from None
    text = line.decode().strip()
    if not text.startswith(READY_PREFIX):
        raise RuntimeError(f"simulated endpoint failed to start (said {text!r})")
    return int(text.removeprefix(READY_PREFIX))
