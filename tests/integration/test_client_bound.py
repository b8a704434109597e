"""The client-bound flag on real runs: raised, with its reason and the expected error, when
the client distorted the figures; not raised when it did not, however late the event loop
woke (docs/load.md, "The client-bound rule").

Every figure judged here is counted or measured by the client itself; thresholds have wide
margins so that a loaded 2-core machine flags (or spares) the same runs.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from scenarios.workload.spec import FixedLength, MixClass, Workload
from tests.conftest import CliResult
from tests.fakes.load_harness import run_load
from workers.client.result import RequestResult
from workers.load.closed_loop import ClosedLoop, RequestSource
from workers.prompts.plan import PlannedRequest, request_planner

# serial: it measures timing (or memory); nothing may run beside it (tests/support/tiers.py).
pytestmark = [pytest.mark.integration, pytest.mark.serial]


def _env() -> dict[str, str]:
    # The embedded default: no Redis configured, the CLI starts its own worker.
    return {k: v for k, v in os.environ.items() if not k.startswith("TOKENBENCH__")}


def _run(
    tmp_path: Path,
    tokenbench: Callable[..., CliResult],
    simulate: dict[str, float],
    tokens: int,
    load: dict[str, Any],
) -> list[dict[str, Any]]:
    scenario = {
        "name": "client-bound",
        "providers": [{"name": "sim", "kind": "simulated", "simulate": simulate}],
        "workload": {
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": 16},
                    "output_tokens": {"dist": "fixed", "value": tokens},
                }
            ]
        },
        "load": load,
        "regions": ["local"],
    }
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario))
    result = tokenbench(
        "run", str(path), "--db", str(tmp_path / "r.duckdb"), "--format", "json", env=_env()
    )
    assert result.code == 0, result.stderr
    stages: list[dict[str, Any]] = json.loads(result.stdout)["stages"]
    return stages


def test_an_open_loop_far_above_what_a_capped_client_sends_is_flagged(
    tmp_path: Path, tokenbench: Callable[..., CliResult]
) -> None:
    # 200 arrivals/s for 2 s, at most one in flight, each answer taking ~70 ms: the client
    # can send one in fourteen. The stage's rates describe a fraction of the planned load.
    (stage,) = _run(
        tmp_path,
        tokenbench,
        {"ttft_ms": 50, "itl_ms": 5},
        4,
        {"rate": {"rps": [200], "arrival": "constant", "max_in_flight": 1}, "duration_s": 2},
    )
    health = stage["client_health"]
    assert stage["client_bound"] is True
    assert "not_sent" in health["client_bound_reasons"]
    assert health["not_sent"] > 0.5 * (health["not_sent"] + health["requests_sent"])
    planned = health["not_sent"] + health["requests_sent"]
    assert f"{health['not_sent']} of {planned} arrivals not sent" in health["client_bound_note"]
    assert "rates are lower than planned by" in health["client_bound_note"]


def test_a_client_that_keeps_up_is_not_flagged(
    tmp_path: Path, tokenbench: Callable[..., CliResult]
) -> None:
    # Two users, one token a second: a stamp merge would need the loop to stall for a
    # second, a send-lag share of 5 % a mean lag over 50 ms. Event-loop lag on a loaded
    # machine (which used to flag such runs) is no reason on its own.
    stages = _run(
        tmp_path,
        tokenbench,
        {"ttft_ms": 50, "itl_ms": 1000},
        2,
        {"concurrency": [2], "requests_per_level": 4},
    )
    assert [(s["requests"], s["errors"]) for s in stages] == [(4, 0)]
    health = stages[0]["client_health"]
    assert health is not None and health["token_events"] == 8  # measured, and judged
    assert stages[0]["client_bound"] is False, health["client_bound_note"]
    assert health["client_bound_reasons"] == [] and health["client_bound_note"] == ""


@dataclass
class _BlockedLoop(ClosedLoop):
    """A closed loop whose event loop is blocked for ``block_s`` every ``every_s``: a client
    too busy to read its sockets while the server keeps writing."""

    block_s: float = 0.06
    every_s: float = 0.15

    async def run(
        self,
        send: Callable[[PlannedRequest, int], Any],
        record: Callable[[PlannedRequest, RequestResult], None],
    ) -> None:
        done = asyncio.Event()

        async def hog() -> None:
            while not done.is_set():
                await asyncio.sleep(self.every_s)
                time.sleep(self.block_s)  # noqa: ASYNC251 - blocking the loop is the point

        task = asyncio.create_task(hog())
        try:
            await super().run(send, record)
        finally:
            done.set()
            await task


def test_a_client_too_busy_to_read_is_flagged_for_merged_stamps(
    simulate_endpoint: Callable[..., str],
) -> None:
    # A token every 5 ms per stream; the loop is blocked 60 ms in every 210: the kernel
    # merges what arrives meanwhile under the last arrival's stamp, about a quarter of all
    # tokens. Blocking is CPU-free, so a loaded machine makes it no less visible.
    url = simulate_endpoint(ttft_ms=20, itl_ms=5)
    workload = Workload(
        mix=[
            MixClass(
                prompt_tokens=FixedLength(dist="fixed", value=16),
                output_tokens=FixedLength(dist="fixed", value=40),
            )
        ]
    )
    source = RequestSource(request_planner(workload, 3, 0), 0, 24, None)
    _, health = run_load(_BlockedLoop(4, source), url)
    assert health["client_bound"] == 1
    assert "read_lag" in str(health["client_bound_reasons"])
    assert int(health["merged_tokens"]) > 0.05 * int(health["token_events"])
    assert "took a later token's arrival" in str(health["client_bound_note"])
