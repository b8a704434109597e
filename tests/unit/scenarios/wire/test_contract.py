"""The wire contract: stream entries decode to what was encoded, stream names parse."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from scenarios.wire.contract import (
    MAX_SHADOW_BATCH,
    EventType,
    RecordBatch,
    ShadowBatch,
    ShadowTask,
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
from scenarios.wire.records import ipc_to_table


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


SAMPLE: dict[str, Any] = {
    "request_key": "k1",
    "seq": 4,
    "messages": [{"role": "user", "content": "hi"}],
    "max_tokens": 8,
    "params": {"temperature": 0.5},
    "prompt_tokens": 1,
}


def test_a_shadow_batch_gives_each_sample_as_a_task_with_the_batchs_session() -> None:
    batch = ShadowBatch.model_validate(
        {
            "run_id": "sess",
            "providers": [{"name": "cand", "kind": "simulated"}],
            "samples": [SAMPLE, {**SAMPLE, "request_key": "k2", "seq": 5, "offset_ms": 12.5}],
        }
    )
    tasks = batch.tasks()
    assert [(t.run_id, t.request_key, t.seq) for t in tasks] == [
        ("sess", "k1", 4),
        ("sess", "k2", 5),
    ]
    assert tasks[1].params == {"temperature": 0.5} and tasks[1].providers == batch.providers
    assert [s.offset_ms for s in batch.samples] == [0.0, 12.5]
    # A single task (what a gateway before batches sent) is a batch of one.
    single = ShadowTask.model_validate(
        {"run_id": "sess", "providers": [{"name": "cand", "kind": "simulated"}], **SAMPLE}
    )
    assert ShadowBatch.of_task(single).tasks() == [single]


@pytest.mark.parametrize(
    "samples",
    [[], [SAMPLE] * (MAX_SHADOW_BATCH + 1), [{**SAMPLE, "offset_ms": 5_000.0}]],
    ids=["empty", "too many", "span past a second"],
)
def test_a_shadow_batch_is_bounded(samples: list[dict[str, Any]]) -> None:
    with pytest.raises(ValidationError):
        ShadowBatch.model_validate(
            {"run_id": "s", "providers": [{"name": "c", "kind": "simulated"}], "samples": samples}
        )
