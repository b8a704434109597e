"""The client-bound rule: which health figures flag a shard, and which do not."""

from __future__ import annotations

import pytest

from scenarios.calibration import ClientHealth, client_bound_reasons, is_client_bound

HEALTHY = ClientHealth(loop_lag_p99_ms=1.0, loop_cpu_util=0.3, schedule_lag_p99_ms=2.0)


def test_a_healthy_client_is_not_client_bound() -> None:
    assert client_bound_reasons(HEALTHY) == []
    assert not is_client_bound(HEALTHY)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"loop_lag_p99_ms": 25.0}, "loop_lag"),
        ({"loop_cpu_util": 0.97}, "loop_cpu"),
        ({"scheduled_rps": 100.0, "achieved_rps": 90.0}, "rate"),
        ({"schedule_lag_p99_ms": 40.0}, "schedule_lag"),
    ],
)
def test_each_threshold_flags_the_shard(change: dict[str, float], reason: str) -> None:
    fields = {
        "loop_lag_p99_ms": HEALTHY.loop_lag_p99_ms,
        "loop_cpu_util": HEALTHY.loop_cpu_util,
        "schedule_lag_p99_ms": HEALTHY.schedule_lag_p99_ms,
        **change,
    }
    assert client_bound_reasons(ClientHealth(**fields)) == [reason]  # type: ignore[arg-type]


def test_a_max_in_flight_cap_explains_lag_and_shortfall() -> None:
    capped = ClientHealth(
        loop_lag_p99_ms=1.0,
        loop_cpu_util=0.2,
        schedule_lag_p99_ms=2000.0,
        scheduled_rps=20.0,
        achieved_rps=12.0,
        cap_waits=40,
    )
    assert client_bound_reasons(capped) == []


def test_from_event_fields_as_redis_returns_them() -> None:
    fields = {
        "loop_lag_p99_ms": b"12.5",
        "loop_cpu_util": "0.4",
        "schedule_lag_p99_ms": "1",
        "scheduled_rps": "50",
        "achieved_rps": "49.9",
        "cap_waits": "0",
    }
    health = ClientHealth.from_fields(
        {k: v.decode() if isinstance(v, bytes) else v for k, v in fields.items()}
    )
    assert health.loop_lag_p99_ms == 12.5 and health.achieved_rps == 49.9
    assert client_bound_reasons(health) == ["loop_lag"]
    assert ClientHealth.from_fields({}).loop_lag_p99_ms == 0.0
