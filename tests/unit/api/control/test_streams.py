"""The streams the control plane reads of a run: events and records, then a planned
run's server telemetry or a shadow session's captures."""

from __future__ import annotations

from api.control.streams import run_streams
from scenarios.wire.contract import StreamKind, parse_stream


def test_a_run_reads_its_telemetry_and_a_session_its_captures() -> None:
    kinds = [parse_stream(s) for s in run_streams("20260101-000000-abcdef", session=False)]
    assert kinds == [
        ("20260101-000000-abcdef", StreamKind.EVENTS),
        ("20260101-000000-abcdef", StreamKind.RECORDS),
        ("20260101-000000-abcdef", StreamKind.METRICS),
    ]
    session = [parse_stream(s)[1] for s in run_streams("r", session=True)]
    assert session == [StreamKind.EVENTS, StreamKind.RECORDS, StreamKind.CAPTURES]
