"""Native-dialect providers through the real path: CLI → Celery worker → DuckDB."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb
import pytest
import yaml

from tests.conftest import CliResult, Proc
from tests.fakes.provider_server import FakeProviders

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProviders]:
    server = FakeProviders().start()
    yield server
    server.stop()


def test_llamacpp_and_tgi_rows_reach_duckdb(
    tmp_path: Path,
    fake: FakeProviders,
    eu_worker: Proc,
    worker_env: dict[str, str],
    tokenbench: Callable[..., CliResult],
) -> None:
    scenario = {
        "name": "native",
        "providers": [
            {"name": "llama", "kind": "llamacpp", "base_url": fake.url("ok")},
            {"name": "tgi", "kind": "tgi", "base_url": fake.url("ok")},
        ],
        "workload": {
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": 8},
                    "output_tokens": {"dist": "fixed", "value": 3},
                }
            ]
        },
        "load": {"concurrency": [2], "requests_per_level": 4},
        "regions": ["eu"],
    }
    path = tmp_path / "native.yaml"
    path.write_text(yaml.safe_dump(scenario))
    db = tmp_path / "native.duckdb"
    result = tokenbench("run", str(path), "--db", str(db), env=worker_env)
    assert result.code == 0, result.stderr + result.stdout + eu_worker.text()[-3000:]

    con = duckdb.connect(str(db), read_only=True)
    rows = con.execute(
        "SELECT provider, status, completion_tokens, token_count_source, server_prompt_ns,"
        " server_decode_ns, retries FROM request_records ORDER BY provider, seq"
    ).fetchall()
    assert len(rows) == 8
    assert {r[1] for r in rows} == {"ok"}
    llama = [r for r in rows if r[0] == "llama"]
    assert {(r[2], r[3], r[4], r[5]) for r in llama} == {(2, "usage", 12_500_000, 20_250_000)}
    tgi = [r for r in rows if r[0] == "tgi"]
    assert {(r[2], r[3], r[4]) for r in tgi} == {(3, "usage", None)}
    assert {r[6] for r in rows} == {0}
