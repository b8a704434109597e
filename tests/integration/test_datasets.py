"""Uploaded datasets end to end with real processes: upload over REST, runs with prompts
and replay datasets on a real worker, `tokenbench submit` and `tokenbench run` with local
files, a dataset Redis lost, and a control plane restarted with a dataset gone."""

from __future__ import annotations

import asyncio
import io
import itertools
import json
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import httpx
import orjson
import pyarrow as pa
import pytest
import redis
import yaml
from redis.asyncio import Redis

from analytics.datasets.uploads import content_id
from api.local.redis_server import RedisServer
from scenarios.loader import validate_scenario
from scenarios.settings import RedisSettings, Settings
from scenarios.wire.contract import ShardSpec, dataset_key, events_stream
from tests.conftest import API_TOKEN, CliResult, Proc, start_control_plane, wait_for_run
from tests.fakes.catcher import Catcher
from tests.support.tiny_tokenizer import train_bpe
from workers.client.http import make_client
from workers.prompts.datasets import DatasetCache
from workers.runtime.context import WorkerContext
from workers.runtime.event_loop import new_loop
from workers.shard.execute import execute_shard
from workers.simulator.pool import SimulatorPool

pytestmark = pytest.mark.integration

NDJSON = {"content-type": "application/x-ndjson"}
PROMPTS = [f"dataset prompt number {n}, unique words {uuid.uuid4().hex}" for n in range(3)]
PROMPT_FILE = b"".join(
    orjson.dumps({"prompt": text, "max_tokens": 2 + n}) + b"\n" for n, text in enumerate(PROMPTS)
)
GAPS_S = [0.0, 0.4, 0.5, 1.2, 1.4]
TRAFFIC = b"".join(
    orjson.dumps(
        {
            "timestamp": 1_700_000_000 + at,
            "messages": [{"role": "user", "content": f"replayed {n}"}],
            "max_tokens": 3,
        }
    )
    + b"\n"
    for n, at in enumerate(GAPS_S)
)
MAX_BODY = 8192
MAX_DATASET = 65536


@pytest.fixture(scope="module")
def api(
    eu_worker: Proc, worker_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[httpx.Client]:
    """A control plane with a small body cap and a larger one for datasets."""
    tmp = tmp_path_factory.mktemp("datasets")
    env = {
        **worker_env,
        "TOKENBENCH__API__MAX_BODY_BYTES": str(MAX_BODY),
        "TOKENBENCH__API__MAX_DATASET_BYTES": str(MAX_DATASET),
    }
    proc, base = start_control_plane(env, tmp / "api.duckdb", tmp / "api.log")
    with httpx.Client(
        base_url=base, headers={"authorization": f"Bearer {API_TOKEN}"}, timeout=30
    ) as client:
        yield client
    proc.stop()


def _records(client: httpx.Client, run_id: str) -> pa.Table:
    answer = client.get(f"/v1/runs/{run_id}/records")
    assert answer.status_code == 200, answer.text
    return pa.ipc.open_stream(io.BytesIO(answer.content)).read_all().sort_by("seq")


def _upload(client: httpx.Client, data: bytes) -> dict[str, Any]:
    answer = client.post("/v1/datasets", content=data, headers=NDJSON)
    assert answer.status_code in (200, 201), answer.text
    return dict(answer.json())


def test_upload_is_content_addressed_validated_and_capped(api: httpx.Client) -> None:
    first = api.post("/v1/datasets", content=TRAFFIC, headers=NDJSON)
    assert first.status_code in (200, 201), first.text
    info = first.json()
    assert info["id"] == content_id(TRAFFIC)
    assert (info["bytes"], info["entries"], info["kinds"]) == (
        len(TRAFFIC),
        len(GAPS_S),
        ["prompts", "replay"],
    )
    again = api.post("/v1/datasets", content=TRAFFIC, headers={"content-type": "application/jsonl"})
    assert again.status_code == 200 and again.json()["id"] == info["id"]
    assert api.get(f"/v1/datasets/{info['id']}").json()["entries"] == len(GAPS_S)
    assert info["id"] in [d["id"] for d in api.get("/v1/datasets").json()]
    assert api.get("/v1/datasets/ds-" + "0" * 64).status_code == 404
    # Larger than the general body cap, within the dataset cap.
    big = b"".join(
        orjson.dumps({"prompt": f"p{n} " + "x" * 100}) + b"\n" for n in range(MAX_BODY // 64)
    )
    assert MAX_BODY < len(big) < MAX_DATASET
    stored = api.post(
        "/v1/datasets", content=big, headers={"content-type": "application/octet-stream"}
    )
    assert stored.status_code == 201, stored.text
    assert stored.json()["kinds"] == ["prompts"]
    too_big = api.post("/v1/datasets", content=b"\n" * (MAX_DATASET + 1), headers=NDJSON)
    assert too_big.status_code == 413
    # The dataset cap is for that route only.
    assert api.post("/v1/scenarios", content=b" " * (MAX_BODY + 1)).status_code == 413
    bad = api.post("/v1/datasets", content=b'{"prompt": "a"}\n{"promt": "b"}\n', headers=NDJSON)
    assert bad.status_code == 422
    assert bad.json()["detail"][0]["line"] == 2
    assert "line 2" in bad.json()["detail"][0]["msg"]
    assert api.post("/v1/datasets", content=TRAFFIC).status_code == 415
    assert (
        httpx.post(f"{api.base_url}/v1/datasets", content=TRAFFIC, headers=NDJSON).status_code
        == 401
    )


@pytest.fixture
def catcher() -> Iterator[Catcher]:
    """A loopback server recording what it receives (here: the prompts sent)."""
    server = Catcher().start()
    yield server
    server.stop()


def test_run_with_a_prompts_dataset_sends_its_prompts(
    api: httpx.Client, catcher: Catcher, redis_server: RedisServer
) -> None:
    dataset = _upload(api, PROMPT_FILE)["id"]
    scenario = {
        "name": "prompts-dataset",
        "providers": [
            {"name": "catch", "kind": "openai", "base_url": f"{catcher.url}/v1", "model": "m"}
        ],
        "workload": {
            "prompts": {"dataset": dataset},
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": 4},
                    "output_tokens": {"dist": "fixed", "value": 9},
                }
            ],
        },
        "load": {"concurrency": [1], "requests_per_level": 4},
        "regions": ["eu"],
    }
    created = api.post("/v1/runs", json={"scenario": scenario})
    assert created.status_code == 201, created.text
    view = wait_for_run(api, created.json()["id"])
    assert view["state"] == "finished", view
    table = _records(api, view["id"])
    assert table.num_rows == 4
    assert table.column("planned_output_tokens").to_pylist() == [2, 3, 4, 2]  # from the lines
    bodies = [orjson.loads(r.body) for r in catcher.requests if r.path.endswith("/completions")]
    sent = sorted(b["messages"][0]["content"] for b in bodies)
    assert sent == sorted([*PROMPTS, PROMPTS[0]])  # cycled in order
    # The bytes stay in Redis for later dispatches, with a TTL.
    assert redis.Redis.from_url(redis_server.url).ttl(dataset_key(dataset)) > 0


def test_run_with_a_replay_dataset_keeps_its_gaps_and_survives_redis_losing_it(
    api: httpx.Client, redis_server: RedisServer
) -> None:
    dataset = _upload(api, TRAFFIC)["id"]
    scenario = {
        "name": "replay-dataset",
        "providers": [
            {"name": "sim", "kind": "simulated", "simulate": {"ttft_ms": 5, "itl_ms": 1}}
        ],
        "workload": {"replay": {"dataset": dataset, "time_scale": 0.5}},
        "load": {},
        "regions": ["eu"],
    }
    client = redis.Redis.from_url(redis_server.url)
    for _ in range(2):
        created = api.post("/v1/runs", json={"scenario": scenario})
        assert created.status_code == 201, created.text
        view = wait_for_run(api, created.json()["id"])
        assert view["state"] == "finished", view
        table = _records(api, view["id"])
        assert table.num_rows == len(GAPS_S)
        intended = [t.as_py().timestamp() for t in table.column("intended_start_at")]
        replayed = [b - a for a, b in itertools.pairwise(intended)]
        wanted = [(b - a) * 0.5 for a, b in itertools.pairwise(GAPS_S)]
        for got, want in zip(replayed, wanted, strict=True):
            assert abs(got - want) < 0.01, (replayed, wanted)
        assert client.ttl(dataset_key(dataset)) > 0
        # Redis loses it: the next run's dispatch puts it back.
        client.delete(dataset_key(dataset))


def test_a_dataset_missing_from_redis_fails_the_shard_with_a_message(
    redis_server: RedisServer,
) -> None:
    missing = "ds-" + "e" * 64
    scenario = validate_scenario(
        {
            "name": "missing",
            "providers": [{"name": "sim", "kind": "simulated"}],
            "workload": {"replay": {"dataset": missing}},
            "load": {},
        }
    )
    spec = ShardSpec(
        run_id=f"missing-{uuid.uuid4().hex[:6]}",
        shard_id="s0.sim.local",
        stage=0,
        region="local",
        provider=scenario.providers[0],
        workload=scenario.workload,
        seed=0,
        concurrency=0,
    )

    async def run() -> list[dict[str, str]]:
        redis_client = Redis.from_url(redis_server.url)
        settings = Settings(redis=RedisSettings(url=redis_server.url))
        context = WorkerContext(
            settings, redis_client, make_client(), SimulatorPool(), "w", "local"
        )
        try:
            assert await execute_shard(spec, context) == 0
            events = await redis_client.xrange(events_stream(spec.run_id))
            return [{k.decode(): v.decode() for k, v in e.items()} for _, e in events]
        finally:
            await context.http.aclose()
            await redis_client.aclose()

    events = asyncio.Runner(loop_factory=new_loop).run(run())
    failed = [e for e in events if e["type"] == "shard_failed"]
    assert len(failed) == 1
    assert f"dataset {missing} is not in Redis" in failed[0]["message"]


def test_worker_cache_shares_one_parse_and_bounds_the_size(redis_server: RedisServer) -> None:
    dataset = content_id(TRAFFIC)

    async def run() -> None:
        client = Redis.from_url(redis_server.url)
        cache = DatasetCache(max_datasets=1)
        try:
            await client.set(dataset_key(dataset), TRAFFIC, ex=60)
            together = await asyncio.gather(
                *(cache.entries(client, dataset, True, 1 << 20) for _ in range(4))
            )
            assert all(entries is together[0] for entries in together)  # one fetch, one parse
            assert [e.timestamp_s for e in together[0]] == [1_700_000_000 + g for g in GAPS_S]
            await client.delete(dataset_key(dataset))
            assert await cache.entries(client, dataset, True, 1 << 20) is together[0]  # cached
            other = content_id(PROMPT_FILE)
            await client.set(dataset_key(other), PROMPT_FILE, ex=60)
            with pytest.raises(ValueError, match="more than this worker accepts"):
                await cache.entries(client, other, False, 16)
            await cache.entries(client, other, False, 1 << 20)  # evicts the first
            with pytest.raises(ValueError, match="not in Redis"):
                await cache.entries(client, dataset, True, 1 << 20)
            await client.delete(dataset_key(other))
        finally:
            await client.aclose()

    asyncio.Runner(loop_factory=new_loop).run(run())


def test_submit_uploads_a_local_replay_file(
    api: httpx.Client, tmp_path: Path, tokenbench: Callable[..., CliResult]
) -> None:
    log = tmp_path / "traffic.jsonl"
    log.write_bytes(TRAFFIC)
    scenario = {
        "name": "submitted-replay",
        "providers": [
            {"name": "sim", "kind": "simulated", "simulate": {"ttft_ms": 5, "itl_ms": 1}}
        ],
        "workload": {"replay": {"path": str(log), "time_scale": 0.2}},
        "load": {},
        "regions": ["eu"],
    }
    path = tmp_path / "replay.yaml"
    path.write_text(yaml.safe_dump(scenario))
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENBENCH__")}
    result = tokenbench(
        "submit", str(path), "--server", str(api.base_url), "--token", API_TOKEN,
        "--wait", "--format", "json", env=env,
    )  # fmt: skip
    assert result.code == 0, result.stderr
    report = json.loads(result.stdout[result.stdout.index("{") :])
    assert report["state"] == "finished"
    assert [row["requests"] for row in report["stages"]] == [len(GAPS_S)]
    assert content_id(TRAFFIC) in [d["id"] for d in api.get("/v1/datasets").json()]
    # A file that cannot be read is named, nothing is submitted.
    fifo = tmp_path / "f.fifo"
    os.mkfifo(fifo)
    path.write_text(yaml.safe_dump({**scenario, "workload": {"replay": {"path": str(fifo)}}}))
    result = tokenbench(
        "submit", str(path), "--server", str(api.base_url), "--token", API_TOKEN, env=env
    )
    assert result.code == 2
    assert "workload.replay.path" in result.stderr and "not a regular file" in result.stderr


def test_run_with_a_local_prompts_file(
    tmp_path: Path, tokenbench: Callable[..., CliResult]
) -> None:
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_bytes(PROMPT_FILE)
    scenario = {
        "name": "local-prompts",
        "providers": [
            {"name": "sim", "kind": "simulated", "simulate": {"ttft_ms": 5, "itl_ms": 1}}
        ],
        "workload": {
            "prompts": {"path": str(prompts)},
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": 4},
                    "output_tokens": {"dist": "fixed", "value": 9},
                }
            ],
        },
        "load": {"concurrency": [2], "requests_per_level": 6},
    }
    path = tmp_path / "local.yaml"
    path.write_text(yaml.safe_dump(scenario))
    db = tmp_path / "local.duckdb"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENBENCH__")}
    result = tokenbench("run", str(path), "--db", str(db), "--format", "json", env=env)
    assert result.code == 0, result.stderr
    con = duckdb.connect(str(db), read_only=True)
    planned = con.execute("SELECT planned_output_tokens FROM requests ORDER BY seq").fetchall()
    assert [row[0] for row in planned] == [2, 3, 4, 2, 3, 4]
    assert con.execute("SELECT dataset_id, kinds FROM datasets").fetchall() == [
        (content_id(PROMPT_FILE), ["prompts"])
    ]


def test_restart_with_a_missing_dataset_fails_that_run_and_starts(
    worker_env: dict[str, str], tmp_path: Path
) -> None:
    db, log = tmp_path / "restart.duckdb", tmp_path / "restart.log"
    region = f"nowhere-{uuid.uuid4().hex[:6]}"  # no worker: both runs stay running
    proc, base = start_control_plane(worker_env, db, log)
    headers = {"authorization": f"Bearer {API_TOKEN}"}
    with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
        dataset = _upload(client, TRAFFIC)["id"]
        replay = {
            "name": "doomed",
            "providers": [{"name": "sim", "kind": "simulated"}],
            "workload": {"replay": {"dataset": dataset}},
            "load": {},
            "regions": [region],
        }
        plain = {
            **replay,
            "name": "survivor",
            "workload": {
                "mix": [
                    {
                        "prompt_tokens": {"dist": "fixed", "value": 1},
                        "output_tokens": {"dist": "fixed", "value": 1},
                    }
                ]
            },
            "load": {"concurrency": [1], "requests_per_level": 1},
        }
        doomed = client.post("/v1/runs", json={"scenario": replay, "wait_for_workers": True})
        survivor = client.post("/v1/runs", json={"scenario": plain, "wait_for_workers": True})
        assert doomed.status_code == survivor.status_code == 201, (doomed.text, survivor.text)
    proc.stop()
    con = duckdb.connect(str(db))
    con.execute("DELETE FROM datasets")
    # A run with a stored plan needs no dataset to resume (its shards read the bytes from
    # Redis); one stored before plans were (schema v7) is re-planned from the dataset's
    # timestamps, and cannot be without them.
    con.execute("UPDATE shards SET spec = NULL WHERE run_id = ?", [doomed.json()["id"]])
    con.close()
    proc, base = start_control_plane(worker_env, db, tmp_path / "restart-2.log")
    try:
        with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
            assert client.get("/readyz").status_code == 200
            view = client.get(f"/v1/runs/{doomed.json()['id']}").json()
            assert view["state"] == "failed"
            messages = {s["message"] for stage in view["stages"] for s in stage["shards"]}
            assert len(messages) == 1
            (message,) = messages
            assert "cannot be resumed" in message and f"dataset {dataset}" in message
            assert client.get(f"/v1/runs/{survivor.json()['id']}").json()["state"] == "running"
            client.post(f"/v1/runs/{survivor.json()['id']}/cancel")
    finally:
        proc.stop()


def test_an_uploaded_tokenizer_sizes_the_prompts_of_a_rest_run(
    api: httpx.Client, redis_server: RedisServer, tmp_path: Path
) -> None:
    content = train_bpe(tmp_path / "tokenizer.json").read_bytes()
    uploaded = api.post(
        "/v1/datasets", content=content, headers={"content-type": "application/json"}
    )
    assert uploaded.status_code in (200, 201), uploaded.text
    info = uploaded.json()
    assert info["kinds"] == ["tokenizer"] and info["entries"] > 256
    scenario = {
        "name": "uploaded-tokenizer",
        "providers": [
            {"name": "sim", "kind": "simulated", "simulate": {"ttft_ms": 2, "itl_ms": 1}}
        ],
        "workload": {
            "tokenizer": {"dataset": info["id"]},
            "mix": [
                {
                    "prompt_tokens": {"dist": "uniform", "min": 50, "max": 300},
                    "output_tokens": {"dist": "fixed", "value": 2},
                }
            ],
        },
        "load": {"concurrency": [2], "requests_per_level": 6},
        "regions": ["eu"],
    }
    created = api.post("/v1/runs", json={"scenario": scenario})
    assert created.status_code == 201, created.text
    view = wait_for_run(api, created.json()["id"])
    assert view["state"] == "finished", view
    table = _records(api, view["id"]).to_pylist()
    assert [row["planned_prompt_source"] for row in table] == ["tokenizer"] * 6
    # The tokenizer's one-token words are whole words: a server counting words agrees.
    assert [row["prompt_tokens"] for row in table] == [
        row["planned_prompt_tokens"] for row in table
    ]
    assert redis.Redis.from_url(redis_server.url).ttl(dataset_key(info["id"])) > 0
