"""`tokenbench simulate --fault KIND:key=value,...`: parsed into a faults entry, problems
named by the fault's position and field."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from api.cli.commands.simulate import build_spec, describe, parse_fault
from scenarios.errors import BadInput


def test_a_fault_option_is_a_faults_entry() -> None:
    assert parse_fault("http_429:every_s=10,for_s=2,retry_after_s=1") == {
        "kind": "http_429",
        "retry_after_s": "1",
        "burst": {"every_s": "10", "for_s": "2"},
    }
    assert parse_fault("reset") == {"kind": "reset"}
    spec = build_spec({"faults": [parse_fault("stall:rate=0.5,stall_ms=200")]})
    assert spec.faults[0].kind == "stall" and spec.faults[0].stall_ms == 200


def test_a_malformed_fault_is_bad_input() -> None:
    with pytest.raises(BadInput, match="'rate' is not key=value"):
        parse_fault("cut:rate")


def test_problems_name_the_fault_and_its_field() -> None:
    with pytest.raises(ValidationError) as caught:
        build_spec(
            {"faults": [parse_fault("cut:rate=0.1"), parse_fault("http_5xx:rate=1,status=404")]}
        )
    assert describe(caught.value) == [
        "--fault 2: status: Input should be greater than or equal to 500"
    ]
    with pytest.raises(ValidationError) as caught:
        build_spec({"faults": [{"kind": "nope"}]})
    (line,) = describe(caught.value)
    assert line.startswith("--fault 1: Input tag 'nope'")
