"""API keys are referenced by variable name and never stored or printed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import redis
import yaml

from api.local.redis_server import RedisServer
from tests.conftest import CliResult, Proc

pytestmark = pytest.mark.integration

SECRET = "sk-test-secret-0123456789abcdef"  # set as TEST_PROVIDER_KEY for the eu worker


def test_api_key_never_reaches_duckdb_redis_or_output(
    tmp_path: Path,
    eu_worker: Proc,
    redis_server: RedisServer,
    worker_env: dict[str, str],
    simulate_endpoint: Callable[..., str],
    tokenbench: Callable[..., CliResult],
) -> None:
    base_url = simulate_endpoint(ttft_ms=5, itl_ms=1)
    scenario = {
        "name": "secrets",
        "providers": [
            {
                "name": "keyed",
                "kind": "openai",
                "base_url": base_url,
                "model": "simulated",
                "api_key_env": "TEST_PROVIDER_KEY",
            }
        ],
        "workload": {
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": 8},
                    "output_tokens": {"dist": "fixed", "value": 4},
                }
            ]
        },
        "load": {"concurrency": [2], "requests_per_level": 6},
        "regions": ["eu"],
    }
    path = tmp_path / "k.yaml"
    path.write_text(yaml.safe_dump(scenario))
    db = tmp_path / "k.duckdb"
    env = {**worker_env, "TEST_PROVIDER_KEY": SECRET}
    result = tokenbench("run", str(path), "--db", str(db), env=env)
    assert result.code == 0, result.stderr
    assert "| keyed" in result.stdout or "keyed" in result.stdout

    assert SECRET.encode() not in db.read_bytes()
    wal = db.with_suffix(".duckdb.wal")
    assert not wal.exists() or SECRET.encode() not in wal.read_bytes()
    assert SECRET not in result.stdout + result.stderr
    assert SECRET not in eu_worker.text()
    client = redis.Redis.from_url(redis_server.url)
    for key in client.scan_iter(count=1000):
        kind = client.type(key)
        dumped = client.dump(key) or b""
        assert SECRET.encode() not in dumped, (key, kind)
