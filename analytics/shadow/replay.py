"""Captured gateway traffic as a replay log: the format ``workload.replay`` reads.

One JSON object per line: ``timestamp`` (seconds since the epoch, when the gateway
received the request), ``messages`` (as the client sent them) and ``max_tokens``
(the client's bound, else the shadows' default). Only requests captured with
``privacy.store_text`` have their messages, so only those can be replayed.
"""

from __future__ import annotations

from typing import Any

import duckdb
import orjson

from analytics.shadow.capture import replay_entries
from scenarios.wire.contract import DEFAULT_MAX_TOKENS


def replay_jsonl(con: duckdb.DuckDBPyConnection, session_id: str) -> bytes:
    """The session's captured requests with text, oldest first, as JSONL."""
    lines = []
    for entry in replay_entries(con, session_id):
        line: dict[str, Any] = {
            "timestamp": entry.timestamp_s,
            "messages": entry.messages,
            # A replay line needs an answer bound; a request without one gets the default.
            "max_tokens": entry.max_tokens or DEFAULT_MAX_TOKENS,
        }
        lines.append(orjson.dumps(line) + b"\n")
    return b"".join(lines)
