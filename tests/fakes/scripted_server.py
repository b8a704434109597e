"""A scripted loopback HTTP server in a thread, with blocking sockets: the n-th accepted
connection runs the n-th script, so a test can write bytes while the client's event loop
is deliberately not running (the arrival transport's tests, tests/unit/workers/client/)."""

from __future__ import annotations

import re
import socket
import ssl
import threading
from collections.abc import Callable

Script = Callable[[socket.socket], None]


class ScriptedServer:
    """A loopback server in a thread: the n-th accepted connection runs ``scripts[n]``."""

    def __init__(
        self, *scripts: Script, tls: ssl.SSLContext | None = None, failing: bool = False
    ) -> None:
        self.failing = failing  # a script expected to fail (a refused TLS handshake)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.accepted = 0
        self.errors: list[BaseException] = []
        self._scripts, self._tls = scripts, tls
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def url(self, path: str = "/") -> str:
        scheme = "https" if self._tls else "http"
        return f"{scheme}://{'localhost' if self._tls else '127.0.0.1'}:{self.port}{path}"

    def _serve(self) -> None:
        for script in self._scripts:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return  # closed by the test
            self.accepted += 1
            try:
                with conn:  # closed even when the TLS handshake below is refused
                    conn.settimeout(10)
                    if self._tls is None:
                        script(conn)
                    else:
                        with self._tls.wrap_socket(conn, server_side=True) as secure:
                            script(secure)
            except BaseException as exc:  # surfaced by close()
                self.errors.append(exc)

    def close(self) -> None:
        self.listener.close()
        self._thread.join(10)
        assert self.failing or not self.errors, self.errors


def read_request(conn: socket.socket) -> bytes:
    """One request: head, then a Content-Length or chunked body."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536) or _eof()
    head, _, body = data.partition(b"\r\n\r\n")
    length = re.search(rb"(?i)content-length: *(\d+)", head)
    if length:
        while len(body) < int(length.group(1)):
            body += conn.recv(65536) or _eof()
    elif re.search(rb"(?i)transfer-encoding: *chunked", head):
        while not body.endswith(b"0\r\n\r\n"):
            body += conn.recv(65536) or _eof()
    return head + b"\r\n\r\n" + body


def _eof() -> bytes:
    raise EOFError("client closed")


def ok(body: bytes = b"hello") -> bytes:
    """A 200 answer with ``body`` and its Content-Length."""
    return b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
