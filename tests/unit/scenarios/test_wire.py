"""The wire contract: stream entries decode to what was encoded, stream names parse."""

from __future__ import annotations

from typing import Any

import pytest

from scenarios.records import ipc_to_table
from scenarios.wire import (
    EventType,
    RecordBatch,
    StreamKind,
    capture_fields,
    captures_stream,
    decode_captures,
    decode_event,
    event_fields,
    events_stream,
    parse_stream,
    records_stream,
)


def _as_read(entry: dict[Any, Any]) -> dict[bytes, bytes]:
    """An entry as Redis hands it back: every key and value bytes."""

    def raw(value: object) -> bytes:
        return value if isinstance(value, bytes) else str(value).encode()

    return {raw(key): raw(value) for key, value in entry.items()}


@pytest.mark.parametrize(
    ("stream", "kind"),
    [
        (records_stream("20261201-070000-abc123"), StreamKind.RECORDS),
        (events_stream("20261201-070000-abc123"), StreamKind.EVENTS),
        (captures_stream("20261201-070000-abc123"), StreamKind.CAPTURES),
    ],
)
def test_stream_names_parse_back(stream: str, kind: StreamKind) -> None:
    assert parse_stream(stream) == ("20261201-070000-abc123", kind)


def test_a_record_batch_round_trips() -> None:
    rows: list[dict[str, object]] = [{"run_id": "r", "shard_id": "s", "seq": 1}]
    batch = RecordBatch.of_rows("s", 2, 7, rows)
    decoded = RecordBatch.decode(_as_read(batch.fields()))
    assert decoded == batch
    assert (decoded.shard_id, decoded.attempt, decoded.batch_seq, decoded.rows) == ("s", 2, 7, 1)
    assert ipc_to_table(decoded.ipc).num_rows == 1


def test_an_event_round_trips_as_strings() -> None:
    entry = event_fields(EventType.FINISHED, "s", 1, 12.5, {"records": 3, "load_kind": "open"})
    assert decode_event(_as_read(entry)) == {
        "type": "shard_finished",
        "shard_id": "s",
        "attempt": "1",
        "at": "12.5",
        "records": "3",
        "load_kind": "open",
    }


def test_captures_round_trip() -> None:
    rows: list[dict[str, object]] = [{"request_key": "k", "sampled": True}]
    assert decode_captures(_as_read(capture_fields(rows))) == rows
