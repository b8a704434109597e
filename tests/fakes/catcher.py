"""A loopback HTTP server that records every byte it receives: the attacker's endpoint.

The hostile-submitter tests (``tests/security``) point providers, redirects and
response-supplied URLs at it and then assert that no secret, file content or
forbidden request ever reached it. It answers chat completions with a short valid SSE
stream (so a run against it looks like a working provider), ``Location`` redirects
when asked (``/redirect?to=URL``), and ``{}`` to anything else. :meth:`Catcher.answer`
sets a canned answer for paths ending in a suffix (e.g. a Replicate-like API whose
prediction hands back stream and poll URLs of the attacker's choosing).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

_SSE = (
    b'data: {"choices":[{"index":0,"delta":{"role":"assistant"}}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{"content":" hi"}}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],'
    b'"usage":{"prompt_tokens":4,"completion_tokens":1,"total_tokens":5}}\n\n'
    b"data: [DONE]\n\n"
)


@dataclass(frozen=True)
class Caught:
    """One request as received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def raw(self) -> bytes:
        """Everything of the request as bytes (request line, headers, body)."""
        head = f"{self.method} {self.path}\r\n" + "".join(
            f"{name}: {value}\r\n" for name, value in self.headers.items()
        )
        return head.encode("utf-8", "replace") + b"\r\n" + self.body


class Catcher:
    """Start with :meth:`start`; ``url`` is its base, ``requests`` what it received."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.requests: list[Caught] = []
        self.host = host
        self._answers: dict[str, tuple[int, bytes, str, dict[str, str]]] = {}
        self._lock = threading.Lock()
        catcher = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_: object) -> None:  # quiet
                return

            def _record(self) -> bytes:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                with catcher._lock:
                    catcher.requests.append(
                        Caught(self.command, self.path, dict(self.headers.items()), body)
                    )
                return body

            def _answer(self, status: int, body: bytes, content_type: str, **extra: str) -> None:
                self.send_response(status)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(body)))
                for name, value in extra.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            def _canned(self) -> bool:
                path = urlsplit(self.path).path
                with catcher._lock:
                    answers = list(catcher._answers.items())
                for suffix, (status, body, content_type, headers) in answers:
                    if path.endswith(suffix):
                        self._answer(status, body, content_type, **headers)
                        return True
                return False

            def _respond(self) -> None:
                self._record()
                if self._canned():
                    return
                parts = urlsplit(self.path)
                if parts.path.endswith("/redirect"):
                    target = parse_qs(parts.query).get("to", ["/"])[0]
                    self._answer(307, b"", "text/plain", Location=target)
                elif self.command == "POST" and parts.path.endswith("/chat/completions"):
                    self._answer(200, _SSE, "text/event-stream")
                else:
                    self._answer(200, b"{}", "application/json")

            do_GET = do_POST = _respond  # noqa: N815 - http.server dispatches by these names

        self._server = ThreadingHTTPServer((host, 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        """The port it listens on (127.0.0.1)."""
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """Its base URL, e.g. ``http://127.0.0.1:PORT``."""
        return f"http://{self.host}:{self.port}"

    def answer(
        self,
        path_suffix: str,
        body: Any,
        status: int = 200,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> None:
        """Answer GET and POST requests whose path ends in ``path_suffix`` with ``body``
        (bytes as they are, anything else as JSON) and ``headers``, instead of the
        default answers."""
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        with self._lock:
            self._answers[path_suffix] = (status, raw, content_type, dict(headers or {}))

    def start(self) -> Catcher:
        """Serve in a background thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()

    def received(self) -> bytes:
        """Every request received so far, as one byte string."""
        with self._lock:
            return b"\n".join(request.raw() for request in self.requests)

    def clear(self) -> None:
        """Forget what was received."""
        with self._lock:
            self.requests.clear()
