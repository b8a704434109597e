"""``tokenbench serve``: the REST control plane, the long-running process next to the
DuckDB file (its workers: ``api/cli/commands/worker.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from api.cli.streams import stderr
from scenarios.settings import env_name, get_settings


def serve(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8080,
    db: Annotated[Path | None, typer.Option(help="DuckDB file.")] = None,
) -> None:
    """Run the REST control plane (OpenAPI docs at /docs)."""
    import uvicorn  # noqa: PLC0415

    from api.cli.signals import sigterm_as_interrupt  # noqa: PLC0415
    from api.local.redis_server import start_redis_server  # noqa: PLC0415
    from api.rest.app import create_app  # noqa: PLC0415
    from workers.runtime.celery_app import app as celery_app  # noqa: PLC0415

    # SIGTERM stops the server as Ctrl-C does: gracefully, the embedded Redis too, exit 0.
    sigterm_as_interrupt()
    settings = get_settings()
    if db is not None:
        settings.duckdb.path = db
    server = None
    try:
        if settings.redis.url is None:
            server = start_redis_server()
            settings.redis.url = server.url
            stderr.print(
                f"embedded Redis at {server.url}: start workers with "
                f"{env_name('redis.url')}={server.url} tokenbench worker --region NAME"
            )
        if not settings.api.tokens:
            stderr.print(
                f"[yellow]{env_name('api.tokens')} is empty: every API request will be refused"
            )
        uvicorn.run(create_app(settings, celery_app), host=host, port=port, log_level="info")
    except KeyboardInterrupt:
        pass  # stopped before uvicorn was serving; uvicorn handles it while serving
    finally:
        if server is not None:
            server.stop()
