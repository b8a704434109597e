"""How many connections a shard's load needs (workers/load/shapes.py)."""

from __future__ import annotations

from api.control.planner import plan_run
from scenarios.loader import validate_scenario
from scenarios.wire.contract import ShardRate, ShardSpec
from workers.load.closed_loop import ClosedLoop
from workers.load.shapes import build_load, connections_needed
from workers.prompts.plan import PlannedRequest


def spec(concurrency: int, requests: int | None, rate: ShardRate | None = None) -> ShardSpec:
    scenario = validate_scenario(
        {
            "name": "s",
            "providers": [{"name": "p", "kind": "simulated"}],
            "workload": {
                "mix": [
                    {
                        "prompt_tokens": {"dist": "fixed", "value": 4},
                        "output_tokens": {"dist": "fixed", "value": 2},
                    }
                ]
            },
            "load": {"concurrency": [1], "requests_per_level": 1},
        }
    )
    (stage,) = plan_run("r", scenario)
    update = {"concurrency": concurrency, "requests": requests, "rate": rate}
    return stage.shards[0].model_copy(update=update)


def test_a_closed_loop_needs_its_streams_but_never_more_than_its_requests() -> None:
    assert connections_needed(spec(500, 3000)) == 500
    assert connections_needed(spec(500, None)) == 500  # bounded by duration
    # A plan made before the planner clamped streams: 50,000 streams, one request.
    assert connections_needed(spec(50_000, 1)) == 1


def test_an_open_loop_needs_its_cap_or_a_second_of_arrivals_within_its_requests() -> None:
    assert connections_needed(spec(0, None, ShardRate(rps=300, parts=2))) == 150
    assert connections_needed(spec(0, None, ShardRate(rps=10_000))) == 1024
    assert connections_needed(spec(64, None, ShardRate(rps=300, max_in_flight=64))) == 64
    assert connections_needed(spec(0, 5, ShardRate(rps=10_000))) == 5


def test_a_closed_loop_starts_no_user_beyond_its_requests() -> None:
    def plan(seq: int) -> PlannedRequest:
        raise AssertionError("nothing is planned by building the load")

    load = build_load(spec(50_000, 1), plan)
    assert isinstance(load, ClosedLoop) and load.concurrency == 1
    load = build_load(spec(500, None), plan)
    assert isinstance(load, ClosedLoop) and load.concurrency == 500
