"""Named server-sent events: event names, multi-line data and the llama.cpp error field."""

from __future__ import annotations

from tests.support.paths import PROVIDER_DATA
from workers.client.sse_events import NamedSSEDecoder, SSEEvent


def test_named_sse_keeps_event_names_and_leading_space_of_text() -> None:
    decoder = NamedSSEDecoder()
    events = decoder.feed((PROVIDER_DATA / "replicate/stream.sse").read_bytes())
    assert [e.event for e in events] == ["output", "output", "output", "done"]
    assert [e.data for e in events[:3]] == [b"Hello", b" world", b"!"]


def test_named_sse_multiline_data_and_llamacpp_error_field() -> None:
    decoder = NamedSSEDecoder()
    events = decoder.feed(
        b'event: output\ndata: a\ndata: b\n\n: keep-alive\n\nerror: {"code":500}\n\n'
    )
    assert events == [SSEEvent("output", b"a\nb"), SSEEvent("error", b'{"code":500}')]
    assert decoder.feed(b"data: tail") == []
    assert decoder.flush() == [SSEEvent("message", b"tail")]
