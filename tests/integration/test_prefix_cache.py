"""Prefix-cache truth through a real `tokenbench run` (embedded Redis, a real worker, the
simulator with its prefix cache, DuckDB): a workload with a target hit rate at 0 %, 50 %
and 90 % achieves about that rate, as usage reports it; a cache reset before each stage is
recorded and empties the simulator's cache (docs/workloads.md, docs/providers.md)."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml

from scenarios.providers.simulate import SimulateSpec
from tests.conftest import CliResult
from workers.runtime.event_loop import new_loop
from workers.simulator.server import SimulatorApp, start_server

pytestmark = pytest.mark.integration

FAST = {"ttft_ms": 2, "itl_ms": 1, "prefix_cache": True}
PROMPT = 256
REQUESTS = 100


def _run(
    tokenbench: Callable[..., CliResult], tmp_path: Path, scenario: dict[str, Any]
) -> tuple[dict[str, Any], duckdb.DuckDBPyConnection]:
    path = tmp_path / f"{scenario['name']}.yaml"
    path.write_text(yaml.safe_dump(scenario))
    db = tmp_path / f"{scenario['name']}.duckdb"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENBENCH__")}
    result = tokenbench("run", str(path), "--db", str(db), "--format", "json", env=env)
    assert result.code == 0, result.stderr
    report = json.loads(result.stdout[result.stdout.index("{") :])
    assert report["state"] == "finished"
    return report, duckdb.connect(str(db), read_only=True)


def _mix(prompt: int = PROMPT) -> list[dict[str, Any]]:
    return [
        {
            "prompt_tokens": {"dist": "fixed", "value": prompt},
            "output_tokens": {"dist": "fixed", "value": 4},
        }
    ]


@pytest.mark.parametrize("target", [0.0, 0.5, 0.9])
def test_a_target_hit_rate_is_achieved_against_the_simulator(
    target: float, tmp_path: Path, tokenbench: Callable[..., CliResult]
) -> None:
    scenario = {
        "name": f"cache-{round(target * 100)}",
        "seed": 5,
        "providers": [
            {"name": "sim", "kind": "simulated", "simulate": FAST, "cache_reset": "vllm"}
        ],
        "workload": {"mix": _mix(), "prefix_cache": {"target_hit_rate": target}},
        "load": {"concurrency": [2], "requests_per_level": REQUESTS},
    }
    report, con = _run(tokenbench, tmp_path, scenario)
    (row,) = report["stages"]
    records = con.execute(
        "SELECT seq, prompt_tokens, cached_tokens, planned_cached_tokens FROM requests "
        "WHERE status = 'ok' ORDER BY seq"
    ).fetchall()
    assert len(records) == REQUESTS
    assert all(cached is not None for _, _, cached, _ in records)  # usage said, every time
    share = round(target * PROMPT)
    assert [planned for *_, planned in records] == [0] + [share] * (REQUESTS - 1)
    achieved = sum(r[2] for r in records) / sum(r[1] for r in records)
    print(f"target {target:.0%}: achieved {achieved:.2%} (report {row['cache_hit_pct']:.2f} %)")
    assert row["cache_hit_pct"] == pytest.approx(100 * achieved)
    assert row["cache_target_pct"] == pytest.approx(100 * target)
    # The two first requests (concurrency 2) seed the text; the simulator caches whole
    # blocks of 16 words (a role marker first): achieved sits at most a few points under.
    assert target - 0.06 <= achieved <= target + 0.001
    assert row["cache_reset"] == "ok"
    sections = {section["key"] for section in report["sections"]}
    assert "prefix-cache" in sections


def test_a_cache_reset_before_each_stage_empties_the_simulators_cache(
    tmp_path: Path, tokenbench: Callable[..., CliResult]
) -> None:
    # Both providers send the same run-wide prefix in every stage; their simulators are
    # distinct processes (distinct seeds). Only `reset` empties its cache between stages.
    scenario = {
        "name": "cache-reset",
        "seed": 9,
        "providers": [
            {
                "name": "reset",
                "kind": "simulated",
                "simulate": {**FAST, "seed": 1},
                "cache_reset": "vllm",
            },
            {"name": "kept", "kind": "simulated", "simulate": {**FAST, "seed": 2}},
        ],
        "workload": {"mix": _mix(), "shared_prefix_tokens": 200},
        "load": {"concurrency": [1, 1], "requests_per_level": 6},
    }
    _, con = _run(tokenbench, tmp_path, scenario)
    first = {
        (provider, stage): cached
        for provider, stage, cached in con.execute(
            "SELECT provider, stage, cached_tokens FROM requests WHERE seq = 0"
        ).fetchall()
    }
    # Stage 0 starts cold for both; stage 1's first request finds the prefix only where
    # the cache was not reset.
    assert first[("reset", 0)] == 0 and first[("kept", 0)] == 0
    assert first[("reset", 1)] == 0
    assert first[("kept", 1)] is not None and first[("kept", 1)] >= 150
    resets = con.execute(
        "SELECT stage, provider, region, status, http_status, worker IS NOT NULL, "
        "started_at IS NOT NULL FROM cache_resets ORDER BY stage"
    ).fetchall()
    assert resets == [
        (0, "reset", "local", "ok", 200, True, True),
        (1, "reset", "local", "ok", 200, True, True),
    ]


@contextmanager
def served_simulator() -> Iterator[tuple[str, SimulatorApp]]:
    """A simulator with its prefix cache on loopback, in a thread of the test: a
    self-hosted server the run's `openai` provider reaches at its base URL."""
    app = SimulatorApp(SimulateSpec.model_validate(FAST))
    loop = new_loop()
    ready = threading.Event()
    ports: list[int] = []

    def serve() -> None:
        asyncio.set_event_loop(loop)
        server = loop.run_until_complete(start_server(app))
        ports.append(server.sockets[0].getsockname()[1])
        ready.set()
        loop.run_forever()
        server.close()
        loop.run_until_complete(server.wait_closed())
        loop.close()

    thread = threading.Thread(target=serve, name="simulator", daemon=True)
    thread.start()
    assert ready.wait(30)
    try:
        yield f"http://127.0.0.1:{ports[0]}/v1", app
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)


def test_a_reset_the_server_refuses_is_recorded_and_the_stage_runs(
    tmp_path: Path, tokenbench: Callable[..., CliResult]
) -> None:
    # Two self-hosted servers (simulators) spoken to as `openai`: one takes vLLM's reset,
    # the other has no SGLang route (404), so that reset fails and the stage runs anyway.
    with served_simulator() as (vllm_url, vllm), served_simulator() as (sglang_url, sglang):
        scenario = {
            "name": "cache-reset-servers",
            "seed": 4,
            "providers": [
                {"name": name, "kind": "openai", "model": "m", "base_url": url, "cache_reset": name}
                for name, url in (("vllm", vllm_url), ("sglang", sglang_url))
            ],
            "workload": {"mix": _mix(64), "prefix_cache": {"target_hit_rate": 0.5}},
            "load": {"concurrency": [1], "requests_per_level": 8},
        }
        report, con = _run(tokenbench, tmp_path, scenario)
        assert vllm.cache is not None and sglang.cache is not None
        assert (vllm.cache.resets, sglang.cache.resets) == (1, 0)
    resets = con.execute(
        "SELECT provider, status, http_status FROM cache_resets ORDER BY provider"
    ).fetchall()
    assert resets == [("sglang", "failed", 404), ("vllm", "ok", 200)]
    rows = {row["provider"]: row for row in report["stages"]}
    assert rows["sglang"]["cache_reset"] == "failed (404)" and rows["vllm"]["cache_reset"] == "ok"
    # The openai adapter read the servers' cached tokens: later requests found the text.
    for provider in ("vllm", "sglang"):
        cached = [
            c for (c,) in con.execute(
                "SELECT cached_tokens FROM requests WHERE provider = ? ORDER BY seq", [provider]
            ).fetchall()
        ]  # fmt: skip
        assert len(cached) == 8 and cached[0] == 0 and all(c > 0 for c in cached[1:])
