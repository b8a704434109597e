"""Incremental Server-Sent Events splitting on raw bytes.

The measurement client stamps each chunk of bytes the moment it arrives and only then
hands it here; an event's time is the arrival of the chunk that completed it. Splitting
works on bytes (no line iterator, no text decoding of the whole stream) because the
client's own CPU time is part of what it must keep out of the numbers (docs/load.md).
"""

from __future__ import annotations

import re

# An event ends at a blank line; servers use \n, \r\n or (rarely) \r line endings.
_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")
_LINE_END = re.compile(rb"\r\n|\n|\r")


class SSEDecoder:
    """Feed bytes, get back the ``data`` payload of every event completed by them.

    Comment lines (``: keep-alive``) and fields other than ``data`` are dropped; an event
    with several ``data:`` lines yields them joined by ``\\n`` as the SSE spec says.
    """

    __slots__ = ("_buffer",)

    def __init__(self) -> None:
        self._buffer = b""

    def single(self, chunk: bytes) -> bytes | None:
        """The payload when ``chunk`` is exactly one whole one-line ``data:`` event and
        nothing is buffered (how servers write token events), else None: then
        :meth:`feed` does the general splitting. A few C calls instead of a regex scan
        and a list, per token event (docs/load.md, "CPU per token event")."""
        return None if self._buffer else _one_data_event(chunk)

    def feed(self, chunk: bytes) -> list[bytes]:
        """Payloads of the events completed by ``chunk``, in order."""
        buffer = self._buffer + chunk if self._buffer else chunk
        # The common case (streaming clients and the gateway's capture read every
        # stream this way): no search for event ends.
        payload = _one_data_event(buffer)
        if payload is not None:
            self._buffer = b""
            return [payload]
        payloads: list[bytes] = []
        start = 0
        for match in _EVENT_END.finditer(buffer):
            payload = _event_data(buffer[start : match.start()])
            if payload is not None:
                payloads.append(payload)
            start = match.end()
        self._buffer = buffer[start:]
        return payloads

    def flush(self) -> list[bytes]:
        """Payload of a last event the stream ended without terminating, if any."""
        rest, self._buffer = self._buffer, b""
        payload = _event_data(rest) if rest.strip() else None
        return [payload] if payload is not None else []


def _one_data_event(data: bytes) -> bytes | None:
    """The payload when ``data`` is one whole one-line ``data:`` event, else None."""
    if (
        not data.endswith(b"\n\n")
        or data.find(b"\n") != len(data) - 2
        or not data.startswith(b"data:")
        or b"\r" in data
    ):
        return None
    return data[6:-2] if data[5:6] == b" " else data[5:-2]


def _event_data(block: bytes) -> bytes | None:
    if block.startswith(b"data:") and b"\n" not in block and b"\r" not in block:
        # The common case: one `data:` line.
        return block[6:] if block[5:6] == b" " else block[5:]
    data_lines = []
    for line in _LINE_END.split(block):
        if line.startswith(b"data:"):
            data_lines.append(line[6:] if line[5:6] == b" " else line[5:])
        elif line == b"data":
            data_lines.append(b"")
    return b"\n".join(data_lines) if data_lines else None
