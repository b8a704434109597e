"""Captured gateway traffic exported as a replay log that the replay workload reads back."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from analytics.shadow.capture import ensure_shadow_schema, ingest_captures
from analytics.shadow.replay import replay_jsonl
from analytics.store.db import connect
from scenarios.datasets.files import parse_entries
from scenarios.wire.contract import DEFAULT_MAX_TOKENS


def capture(
    key: str, seq: int, at_s: float, messages: object, max_tokens: int | None
) -> dict[str, object]:
    """A capture row as the gateway's sink publishes it."""
    return {
        "run_id": "sess",
        "request_key": key,
        "seq": seq,
        "gateway": "gw",
        "received_at": int(at_s * 1e9),
        "stream": True,
        "sampled": False,
        "enqueued": False,
        "prompt_chars": 5,
        "prompt_sha256": "0" * 64,
        "max_tokens": max_tokens,
        "messages": None if messages is None else orjson.dumps(messages).decode(),
    }


def test_replay_log_round_trips_through_the_replay_reader(tmp_path: Path) -> None:
    con = connect(tmp_path / "s.duckdb")
    ensure_shadow_schema(con)
    chat = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    ingest_captures(
        con,
        [
            capture("c", 2, 1_700_000_003.25, [{"role": "user", "content": "third"}], 64),
            capture("a", 0, 1_700_000_001.0, chat, None),  # the client set no bound
            capture("x", 1, 1_700_000_002.0, None, 10),  # text not stored: cannot be replayed
            capture("z", 0, 1_700_000_000.0, [{"role": "user", "content": "other"}], 5)
            | {"run_id": "other-session"},
        ],
    )
    data = replay_jsonl(con, "sess")
    lines = [orjson.loads(line) for line in data.splitlines()]
    assert [line["timestamp"] for line in lines] == pytest.approx(
        [1_700_000_001.0, 1_700_000_003.25]
    )
    assert lines[0]["messages"] == chat
    assert [line["max_tokens"] for line in lines] == [DEFAULT_MAX_TOKENS, 64]

    entries = parse_entries(data, "replay.jsonl", replay=True)
    assert [e.messages for e in entries] == [
        (("system", "be brief"), ("user", "hi")),
        (("user", "third"),),
    ]
    times = [e.timestamp_s for e in entries]
    assert times == pytest.approx([1_700_000_001.0, 1_700_000_003.25])


def test_a_session_without_stored_text_exports_nothing(tmp_path: Path) -> None:
    con = connect(tmp_path / "s.duckdb")
    ensure_shadow_schema(con)
    ingest_captures(con, [capture("x", 0, 1_700_000_000.0, None, 10)])
    assert replay_jsonl(con, "sess") == b""
