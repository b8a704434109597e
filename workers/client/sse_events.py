"""Incremental Server-Sent Events splitting that keeps each event's name.

``sse.SSEDecoder`` returns ``data`` payloads only, which is all OpenAI-style streams need.
Replicate names its events (``output``, ``error``, ``done``) and sends plain text, and
llama.cpp's ``llama-server`` reports mid-stream errors on a non-standard ``error:`` line;
this decoder keeps both. Same byte-level splitting and stamping contract as SSEDecoder:
an event is complete, and usable, only when the blank line ending it has arrived.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")
_LINE_END = re.compile(rb"\r\n|\n|\r")


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One event: its name (``message`` when unnamed) and its data lines joined by \\n."""

    event: str
    data: bytes


class NamedSSEDecoder:
    """Feed bytes, get back every event they complete."""

    __slots__ = ("_buffer",)

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Events completed by ``chunk``, in order."""
        buffer = self._buffer + chunk if self._buffer else chunk
        events: list[SSEEvent] = []
        start = 0
        for match in _EVENT_END.finditer(buffer):
            event = parse_event(buffer[start : match.start()])
            if event is not None:
                events.append(event)
            start = match.end()
        self._buffer = buffer[start:]
        return events

    def flush(self) -> list[SSEEvent]:
        """An event the stream ended without terminating, if any."""
        rest, self._buffer = self._buffer, b""
        event = parse_event(rest) if rest.strip() else None
        return [event] if event is not None else []


def parse_event(block: bytes) -> SSEEvent | None:
    """The event of one block of lines; None for comment-only or empty blocks."""
    name = "message"
    data: list[bytes] = []
    error: bytes | None = None
    for line in _LINE_END.split(block):
        if not line or line.startswith(b":"):
            continue
        field, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if field == b"data":
            data.append(value)
        elif field == b"event":
            name = value.decode("utf-8", errors="replace")
        elif field == b"error":
            error = value  # llama-server: "error: {json}" instead of a data line
    if data:
        return SSEEvent(name, b"\n".join(data))
    if error is not None:
        return SSEEvent("error", error)
    return None
