"""Running simulated endpoints as their own processes.

A simulated provider is served by a separate process on loopback so that its timers
never share an event loop (or a GIL) with the measuring client. Workers start one per
distinct ``simulate`` configuration and stop it when no shard has used it for a while
(``workers/simulator/pool.py``); the child exits by itself when its parent dies, even
by SIGKILL.
"""

from __future__ import annotations

import asyncio
import contextlib
import os

from scenarios.providers.simulate import SimulateSpec
from scenarios.tokenizers.files import TokenizerUnavailable
from workers.simulator.server import SimulatorApp, start_server

READY_PREFIX = "TOKENBENCH_SIMULATOR_READY port="
# Said instead of the ready line when the endpoint cannot be built (e.g. its
# prompt_tokenizer is refused), so that the shard fails with the reason.
FAILED_PREFIX = "TOKENBENCH_SIMULATOR_FAILED "
HOST = "127.0.0.1"


async def serve(
    spec: SimulateSpec,
    model: str,
    host: str = "127.0.0.1",
    port: int = 0,
    parent_pid: int | None = None,
) -> None:
    """Serve until cancelled (or until ``parent_pid`` is gone); prints the ready line,
    or the failed line with the reason when the endpoint cannot be built."""
    try:
        app = SimulatorApp(spec, model)
    except TokenizerUnavailable as exc:
        print(f"{FAILED_PREFIX}{' '.join(str(exc).split())}", flush=True)
        return
    server = await start_server(app, host, port)
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
    from workers.runtime.event_loop import new_loop  # noqa: PLC0415 - avoid a cycle at import

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
