"""``tokenbench worker``: a region's worker processes, the long-running data plane of a
deployment (one process, or a supervisor of several: ``workers/runtime/worker_processes.py``)."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from scenarios.settings import env_name, get_settings


def worker(
    region: Annotated[str, typer.Option(help="Region whose queue to consume.")] = "local",
    concurrency: Annotated[int, typer.Option(help="Shards each process runs at once.")] = 8,
    processes: Annotated[
        int | None,
        typer.Option(
            min=1,
            help=(
                "Worker processes (each one core at most); a dead one is restarted. "
                f"Default: {env_name('worker.processes')}, else one per core."
            ),
        ),
    ] = None,
    loglevel: Annotated[str, typer.Option(help="Celery log level.")] = "WARNING",
) -> None:
    """Run a region's workers (needs TOKENBENCH__REDIS__URL)."""
    settings = get_settings()
    if settings.redis.url is None:  # said once, not by each of the processes
        raise SystemExit(f"set {env_name('redis.url')} to the broker a worker should use")
    count = processes or settings.worker.processes or os.cpu_count() or 1
    if count == 1:
        from workers.runtime.worker_main import start_worker  # noqa: PLC0415

        start_worker(region, concurrency, loglevel)
        return
    from workers.runtime.worker_processes import run_worker_processes  # noqa: PLC0415

    code = run_worker_processes(region, concurrency, loglevel, count)
    if code:
        raise typer.Exit(code)
