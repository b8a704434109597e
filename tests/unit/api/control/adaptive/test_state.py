"""The stages an adaptive load starts with: one stream, then (for a sweep or a search by
rate) its throughput stage, for every provider."""

from __future__ import annotations

from api.control.adaptive.state import AdaptiveState, initial_roles
from tests.support.adaptive import scenario


def test_a_sweep_starts_synchronous_then_at_its_throughput_level() -> None:
    spec = scenario(
        {"sweep": {"points": 3, "throughput_concurrency": 16}, "requests_per_level": 50}, 2
    )
    roles = initial_roles(spec)
    assert [(r.stage, r.provider, r.role, r.level) for r in roles] == [
        (0, "p0", "synchronous", 1.0),
        (0, "p1", "synchronous", 1.0),
        (1, "p0", "throughput", 16.0),
        (1, "p1", "throughput", 16.0),
    ]
    assert {r.load_kind for r in roles} == {"closed"}


def test_a_search_by_concurrency_starts_from_one_stream_alone() -> None:
    spec = scenario(
        {
            "find_capacity": {"slo": {"ttft_ms": 100}, "by": "concurrency"},
            "requests_per_level": 600,
        }
    )
    assert [(r.stage, r.role) for r in initial_roles(spec)] == [(0, "synchronous")]
    state = AdaptiveState(deciding=spec.load.adaptive)
    assert state.deciding and not state.decided_all and not state.busy
