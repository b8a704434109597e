"""Starting a private Redis leaves no client connection of its own behind: a socket left
to the garbage collector is closed whenever the collector runs, in whatever test runs
then, as a ResourceWarning (an error in this suite)."""

from __future__ import annotations

import gc
import socket

import pytest

from api.local.redis_server import start_redis_server

pytestmark = pytest.mark.integration


def _open_peers() -> list[int]:
    """Remote ports of this process's open TCP sockets that Python objects hold."""
    ports = []
    for candidate in gc.get_objects():
        if isinstance(candidate, socket.socket) and candidate.fileno() != -1:
            try:
                ports.append(candidate.getpeername()[1])
            except OSError:
                continue  # listening or not connected
    return ports


def test_the_readiness_probe_closes_its_connection() -> None:
    gc.disable()  # an abandoned connection stays in memory, visible, until collected
    try:
        server = start_redis_server()
        try:
            assert server.port not in _open_peers()
            server.kill()
            server.restart()  # probes again
            assert server.port not in _open_peers()
        finally:
            server.kill()
            server.stop()
    finally:
        gc.enable()
