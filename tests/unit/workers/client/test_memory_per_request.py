"""What one request in flight keeps (docs/load.md, "Memory"): its token stamps as 8-byte
array entries, its body in an allocation of its own size."""

from __future__ import annotations

import tracemalloc

import orjson

from workers.client.result import RequestResult
from workers.client.streaming import own_size, token_event


def test_token_stamps_are_eight_bytes_each_and_not_shared() -> None:
    first, second = RequestResult(intended_start=0), RequestResult(intended_start=0)
    for stamp in (5, 9, 14):
        token_event(first, stamp, output=True)
    assert first.token_stamps.itemsize == 8
    assert list(first.token_stamps) == [5, 9, 14] and len(second.token_stamps) == 0
    assert first.itl_gaps() == [4, 5]
    assert (first.first_token, first.last_token) == (5, 14)


def test_own_size_keeps_the_bytes_without_a_larger_buffer() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "a few words"}]}
    encoded = orjson.dumps(body)
    assert own_size(encoded) == encoded
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = [own_size(orjson.dumps(body)) for _ in range(100)]
        per_body = (tracemalloc.get_traced_memory()[0] - before) / len(kept)
    finally:
        tracemalloc.stop()
    # orjson's own result holds >= 4 KiB; the copy about its length (plus list slot).
    assert per_body < len(encoded) + 200
