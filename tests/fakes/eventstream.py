"""Encoder of AWS ``application/vnd.amazon.eventstream`` frames, for the Bedrock fake.

Frame layout (AWS event-stream encoding): a 12-byte prelude (total length, headers
length, CRC32 of those 8 bytes), the headers (name length u8, name, value type u8 = 7
for string, value length u16, value), the payload, then the CRC32 of everything before.
The decoder under test is botocore's; encoding by hand here keeps the fake independent
of the library it checks.
"""

from __future__ import annotations

import binascii
import json
import struct
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent.parent / "data" / "providers" / "bedrock"
_STRING = 7


def frame(headers: list[tuple[str, str]], payload: bytes) -> bytes:
    """One complete event-stream message."""
    encoded = b"".join(
        struct.pack(">B", len(name.encode()))
        + name.encode()
        + struct.pack(">BH", _STRING, len(value.encode()))
        + value.encode()
        for name, value in headers
    )
    total = 12 + len(encoded) + len(payload) + 4
    prelude = struct.pack(">II", total, len(encoded))
    message = prelude + struct.pack(">I", binascii.crc32(prelude)) + encoded + payload
    return message + struct.pack(">I", binascii.crc32(message))


def converse_frame(item: dict[str, Any]) -> bytes:
    """A ConverseStream event or exception frame from its readable form in frames.json."""
    payload = json.dumps(item["payload"], separators=(",", ":")).encode()
    if "exception" in item:
        headers = [
            (":exception-type", item["exception"]),
            (":content-type", "application/json"),
            (":message-type", "exception"),
        ]
    else:
        headers = [
            (":event-type", item["event"]),
            (":content-type", "application/json"),
            (":message-type", "event"),
        ]
    return frame(headers, payload)


def recorded_frames(name: str) -> list[bytes]:
    """Frames of one recorded stream in frames.json (``stream``, ``midstream_exception``...)."""
    items = json.loads((DATA / "frames.json").read_text())[name]
    return [converse_frame(item) for item in items]


if __name__ == "__main__":
    # Regenerates the committed binary from its readable source.
    (DATA / "stream.bin").write_bytes(b"".join(recorded_frames("stream")))
