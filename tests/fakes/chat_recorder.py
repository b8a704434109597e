"""A loopback chat-completions server that answers every request with its own text and
keeps what it received: for checking what a multi-turn session sends.

Answer ``n`` (in arrival order, from 0) is ``max_tokens`` words ``a<n>.<i>``, streamed one
word an event with usage (prompt tokens: the request's whitespace-separated words), so
a later turn that sends answer ``n`` back is recognisable, and a test can tell which
answer it carried. ``received`` keeps each request's decoded body and its arrival time
(``time.time()``), in arrival order.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Received:
    """One chat request as it arrived, and the answer it was given."""

    number: int
    at: float
    body: dict[str, Any]
    answer: str


def answer_text(number: int, words: int) -> str:
    """The text of answer ``number`` of ``words`` words, as the client receives it."""
    return "".join(f" a{number}.{i}" for i in range(words))


class ChatRecorder:
    """Start with :meth:`start`; ``url`` is its ``/v1`` base, ``received`` what came in."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        self._lock = threading.Lock()
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_: object) -> None:  # quiet
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                words = int(body.get("max_tokens") or 1)
                with recorder._lock:
                    number = len(recorder.received)
                    text = answer_text(number, words)
                    recorder.received.append(Received(number, time.time(), body, text))
                prompt = sum(len(str(m.get("content", "")).split()) for m in body["messages"])
                events = [{"choices": [{"index": 0, "delta": {"role": "assistant"}}]}]
                events += [
                    {"choices": [{"index": 0, "delta": {"content": f" a{number}.{i}"}}]}
                    for i in range(words)
                ]
                events.append(
                    {
                        "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}],
                        "usage": {
                            "prompt_tokens": prompt,
                            "completion_tokens": words,
                            "total_tokens": prompt + words,
                        },
                    }
                )
                payload = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
                payload += b"data: [DONE]\n\n"
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """Its base URL up to and including ``/v1``."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> ChatRecorder:
        """Serve in a background thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()
