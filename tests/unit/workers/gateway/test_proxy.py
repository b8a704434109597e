"""The gateway proxy's usage filter: only the usage event is removed, events pass at once."""

from __future__ import annotations

from workers.gateway.proxy import UsageFilter

USAGE = b'data: {"id":"x","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}\n\n'
TOKEN = b'data: {"id":"x","choices":[{"index":0,"delta":{"content":"hi"}}],"usage":null}\n\n'
FINISH = b'data: {"id":"x","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
DONE = b"data: [DONE]\n\n"


def test_usage_filter_removes_only_the_usage_event() -> None:
    stream = TOKEN + TOKEN + FINISH + USAGE + DONE
    for size in (1, 7, 50, len(stream)):
        usage_filter = UsageFilter()
        out = b"".join(usage_filter.feed(stream[i : i + size]) for i in range(0, len(stream), size))
        out += usage_filter.flush()
        assert out == TOKEN + TOKEN + FINISH + DONE, size


def test_usage_filter_releases_complete_events_at_once() -> None:
    usage_filter = UsageFilter()
    assert usage_filter.feed(TOKEN[:10]) == b""
    assert usage_filter.feed(TOKEN[10:] + FINISH[:5]) == TOKEN
    crlf = TOKEN.replace(b"\n\n", b"\r\n\r\n")
    assert UsageFilter().feed(crlf) == crlf
    assert UsageFilter().feed(USAGE.replace(b"\n\n", b"\r\n\r\n")) == b""
