"""The hosted APIs' dialects through the real path: CLI → Celery worker → the simulator
(``tokenbench simulate``, which speaks each dialect) → Arrow records → DuckDB, in closed
and open loop, and as multi-turn sessions against the simulator's prefix cache. The
anthropic provider reads its key from the worker's environment (bound to loopback), so
the secret lookup is on the path too."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml

from tests.conftest import CliResult, Proc

pytestmark = pytest.mark.integration

SECRET = "sk-test-secret-0123456789abcdef"  # TEST_PROVIDER_KEY of the eu worker


def providers(url: str) -> list[dict[str, Any]]:
    root = url.removesuffix("/v1")
    return [
        {"name": "claude", "kind": "anthropic", "base_url": root, "model": "sim-claude",
         "api_key_env": "TEST_PROVIDER_KEY"},
        {"name": "responses", "kind": "openai-responses", "base_url": url, "model": "sim-gpt"},
        {"name": "gem", "kind": "gemini", "base_url": root, "model": "sim-gemini"},
    ]  # fmt: skip


def run_scenario(
    tmp_path: Path,
    tokenbench: Callable[..., CliResult],
    worker_env: dict[str, str],
    worker: Proc,
    name: str,
    url: str,
    load: dict[str, Any],
    query: str = "",
    workload: dict[str, Any] | None = None,
) -> list[tuple[Any, ...]]:
    scenario = {
        "name": name,
        "providers": providers(url),
        "workload": workload
        or {
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": 12},
                    "output_tokens": {"dist": "fixed", "value": 5},
                }
            ]
        },
        "load": load,
        "regions": ["eu"],
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(scenario))
    db = tmp_path / f"{name}.duckdb"
    result = tokenbench("run", str(path), "--db", str(db), env=worker_env)
    assert result.code == 0, result.stderr + result.stdout + worker.text()[-3000:]
    assert SECRET not in result.stdout + result.stderr
    assert SECRET.encode() not in db.read_bytes()
    con = duckdb.connect(str(db), read_only=True)
    return con.execute(
        query
        or "SELECT provider, status, completion_tokens, token_count_source, prompt_tokens,"
        " finish_reason, response_id, server_request_id, cached_tokens, ttft_ns"
        " FROM request_records ORDER BY provider, seq"
    ).fetchall()


def check(rows: list[tuple[Any, ...]], per_provider: int) -> None:
    assert len(rows) == 3 * per_provider
    assert {r[1] for r in rows} == {"ok"}, rows
    for provider in ("claude", "responses", "gem"):
        mine = [r for r in rows if r[0] == provider]
        assert len(mine) == per_provider
        # exactly the planned length, counted by the server's usage, ended at the limit
        assert {(r[2], r[3], r[5]) for r in mine} == {(5, "usage", "length")}
        assert all(r[4] is not None and r[4] > 0 for r in mine)
        assert all(r[9] is not None and r[9] > 0 for r in mine)
        ids = [r[6] for r in mine]
        assert None not in ids and len(set(ids)) == per_provider  # each answer's own id
        assert {r[8] for r in mine} == {None}  # no prefix cache: unknown, never zero
    request_ids = {r[0]: r[7] for r in rows}
    assert request_ids["claude"] is not None and request_ids["responses"] is not None
    assert request_ids["gem"] is None  # Gemini sends none the docs name


def test_closed_loop_against_the_simulated_dialects(
    tmp_path: Path,
    eu_worker: Proc,
    worker_env: dict[str, str],
    simulate_endpoint: Callable[..., str],
    tokenbench: Callable[..., CliResult],
) -> None:
    url = simulate_endpoint(ttft_ms=5, itl_ms=1)
    load = {"concurrency": [1, 3], "requests_per_level": 6}
    rows = run_scenario(tmp_path, tokenbench, worker_env, eu_worker, "closed", url, load)
    check(rows, 12)


def test_open_loop_against_the_simulated_dialects(
    tmp_path: Path,
    eu_worker: Proc,
    worker_env: dict[str, str],
    simulate_endpoint: Callable[..., str],
    tokenbench: Callable[..., CliResult],
) -> None:
    url = simulate_endpoint(ttft_ms=5, itl_ms=1)
    load = {"rate": {"rps": [20], "arrival": "poisson"}, "requests_per_level": 8}
    rows = run_scenario(tmp_path, tokenbench, worker_env, eu_worker, "open", url, load)
    check(rows, 8)


def test_sessions_send_the_answers_back_and_the_prefix_cache_shows_in_usage(
    tmp_path: Path,
    eu_worker: Proc,
    worker_env: dict[str, str],
    simulate_endpoint: Callable[..., str],
    tokenbench: Callable[..., CliResult],
) -> None:
    url = simulate_endpoint(ttft_ms=5, itl_ms=1, prefix_cache=True)
    workload = {
        "mix": [
            {
                "prompt_tokens": {"dist": "uniform", "min": 16, "max": 32},
                "output_tokens": {"dist": "fixed", "value": 8},
            }
        ],
        "sessions": {"turns": 3, "think_time": 0.01},
    }
    query = (
        "SELECT provider, turn, status, prompt_tokens, planned_prompt_tokens, cached_tokens"
        " FROM request_records ORDER BY provider, session_id, turn"
    )
    load = {"concurrency": [2], "sessions_per_level": 3}
    rows = run_scenario(
        tmp_path, tokenbench, worker_env, eu_worker, "sessions", url, load, query, workload
    )
    assert len(rows) == 3 * 3 * 3 and {r[2] for r in rows} == {"ok"}, rows
    for provider, turn, _, prompt, planned, cached in rows:
        # The simulator counts a token a word: the whole conversation, the earlier
        # answers' text included, arrived as planned.
        assert prompt == planned, (provider, turn)
        assert cached is not None and 0 <= cached <= prompt
        if turn > 1:  # the conversation so far was served before: read from the cache
            assert cached > 0, (provider, turn, cached)
