"""Fault specs of the simulated endpoint: burst windows, and refusals that name the field."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from scenarios.providers.faults import FAULT_KINDS, Burst, error_kinds
from scenarios.providers.simulate import SimulateSpec


def test_burst_windows_repeat_from_the_offset() -> None:
    burst = Burst(every_s=10, for_s=2)
    assert [burst.covers(t) for t in (0, 1.99, 2, 9.99, 10, 11.5, 12)] == [
        True, True, False, False, True, True, False,
    ]  # fmt: skip
    late = Burst(every_s=10, for_s=2, offset_s=8)
    assert [late.covers(t) for t in (0, 7.9, 8, 9.9, 10, 18)] == [
        False, False, True, True, False, True,
    ]  # fmt: skip


def _problems(faults: list[dict[str, Any]]) -> list[tuple[tuple[Any, ...], str]]:
    with pytest.raises(ValidationError) as caught:
        SimulateSpec.model_validate({"faults": faults})
    return [(tuple(e["loc"]), e["msg"]) for e in caught.value.errors(include_url=False)]


def test_every_kind_is_accepted_with_its_own_fields() -> None:
    spec = SimulateSpec.model_validate(
        {
            "faults": [
                {"kind": "http_429", "burst": {"every_s": 10, "for_s": 2}, "retry_after_s": 3},
                {"kind": "http_5xx", "rate": 0.1, "status": 502},
                {"kind": "reset", "rate": 0.01},
                {"kind": "stall", "rate": 0.5, "stall_ms": 250},
                {"kind": "cut", "burst": {"every_s": 5, "for_s": 1}, "rate": 0.5},
            ]
        }
    )
    assert [f.kind for f in spec.faults] == list(FAULT_KINDS)
    assert set(error_kinds()) <= set(FAULT_KINDS)
    # The spec travels as JSON (worker messages, the simulator's command line).
    assert SimulateSpec.model_validate_json(spec.model_dump_json()) == spec


def test_bad_faults_name_their_field() -> None:
    assert _problems([{"kind": "http_429", "burst": {"every_s": 1, "for_s": 2}}]) == [
        (("faults", 0, "http_429", "burst"), "Value error, for_s 2 is longer than every_s 1")
    ]
    ((where, message),) = _problems([{"kind": "cut"}])
    assert where == ("faults", 0, "cut") and "give rate, burst or both" in message
    ((where, _),) = _problems([{"kind": "http_5xx", "rate": 1, "status": 404}])
    assert where == ("faults", 0, "http_5xx", "status")
    ((where, _),) = _problems([{"kind": "http_429", "rate": 1, "status": 503}])
    assert where == ("faults", 0, "http_429", "status")  # a field of another kind
    ((where, _),) = _problems([{"kind": "stall", "rate": 1}])
    assert where == ("faults", 0, "stall", "stall_ms")
    ((where, _),) = _problems([{"kind": "teapot", "rate": 1}])
    assert where == ("faults", 0)
    ((where, _),) = _problems([{"kind": "reset", "rate": 1.5}])
    assert where == ("faults", 0, "reset", "rate")


def test_the_fault_list_and_the_log_are_bounded() -> None:
    with pytest.raises(ValidationError, match="at most 16"):
        SimulateSpec.model_validate({"faults": [{"kind": "cut", "rate": 0.1}] * 17})
    with pytest.raises(ValidationError):
        SimulateSpec(request_log=10_000_001)
    assert SimulateSpec().request_log == 100_000
