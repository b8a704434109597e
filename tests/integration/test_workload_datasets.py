"""``workload.dataset`` through the real worker path against the simulator: `tokenbench
run` with a ShareGPT dump, an OpenAI chat JSONL file, a Parquet file and a Hugging Face
hub dataset from a cache on disk (all generated at test time); an upload and a run over
REST, where a path or a hub name is a 422 at its field. Records carry the dataset row
they came from; filters and sampling are checked against numpy and the file."""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import httpx
import numpy as np
import orjson
import pyarrow as pa
import pytest
import yaml

from analytics.datasets.fingerprint import run_dataset
from scenarios.workload.spec import Workload
from tests.conftest import API_TOKEN, CliResult, Proc, start_control_plane, wait_for_run
from tests.support.dataset_files import (
    HUB_COMMIT,
    chat_jsonl,
    hub_cache,
    parquet_bytes,
    prompts_table,
    sharegpt_json,
    sharegpt_rows,
)
from workers.prompts.plan import plan_request

pytestmark = pytest.mark.integration

SIM = {"name": "sim", "kind": "simulated", "simulate": {"ttft_ms": 2, "itl_ms": 0.5}}
MIX = [
    {
        "prompt_tokens": {"dist": "uniform", "min": 4, "max": 80},
        "output_tokens": {"dist": "uniform", "min": 2, "max": 12},
    }
]


def _estimate(chars: np.ndarray) -> np.ndarray:
    """Tokens by the 4-characters estimate (round half to even, as Python's round)."""
    return np.maximum(1, np.round(chars / 4)).astype(int)


def _local_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENBENCH__")}
    return {**env, **extra}


def _run(
    tokenbench: Callable[..., CliResult],
    tmp_path: Path,
    workload: dict[str, Any],
    requests: int,
    seed: int = 4,
    env: dict[str, str] | None = None,
) -> tuple[dict[str, Any], duckdb.DuckDBPyConnection]:
    scenario = {
        "name": "dataset-run",
        "seed": seed,
        "providers": [SIM],
        "workload": workload,
        "load": {"concurrency": [3], "requests_per_level": requests},
    }
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario))
    db = tmp_path / "run.duckdb"
    result = tokenbench(
        "run", str(path), "--db", str(db), "--format", "json", env=env or _local_env()
    )
    assert result.code == 0, result.stderr
    report = json.loads(result.stdout[result.stdout.index("{") :])
    assert report["state"] == "finished"
    return report, duckdb.connect(str(db), read_only=True)


def test_sharegpt_rows_filtered_and_shuffled_each_used_once(
    tmp_path: Path, tokenbench: Callable[..., CliResult]
) -> None:
    dump = tmp_path / "sharegpt.json"
    dump.write_bytes(sharegpt_json(80, broken=3))
    rows = sharegpt_rows(80)
    prompt = _estimate(np.array([len(r["conversations"][0]["value"]) for r in rows]))
    answer = _estimate(np.array([len(r["conversations"][1]["value"]) for r in rows]))
    kept = np.flatnonzero((prompt >= 10) & (prompt <= 70) & (answer <= 40))
    assert 10 < len(kept) < 80
    filters = {"min_prompt_tokens": 10, "max_prompt_tokens": 70, "max_output_tokens": 40}
    report, con = _run(
        tokenbench, tmp_path, {"dataset": {"path": str(dump), "filters": filters}}, len(kept)
    )
    records = con.execute(
        "SELECT dataset_id, dataset_row, planned_prompt_tokens, planned_output_tokens, "
        "completion_tokens, planned_prompt_source, status FROM requests ORDER BY seq"
    ).fetchall()
    assert len(records) == len(kept) and all(r[6] == "ok" for r in records)
    # Every kept row exactly once (a shuffle, not file order), none of the others.
    used = [r[1] for r in records]
    assert sorted(used) == kept.tolist() and used != kept.tolist()
    for _, row, planned_prompt, planned_output, completion, source, _ in records:
        assert (planned_prompt, planned_output) == (prompt[row], answer[row])
        assert completion == planned_output and source == "estimate"
    dataset = report["dataset"]
    assert {r[0] for r in records} == {dataset["dataset_id"]}
    assert dataset["source_sha256"] == hashlib.sha256(dump.read_bytes()).hexdigest()
    assert dataset["source_format"] == "json/sharegpt" and dataset["origin"] == str(dump)
    assert (dataset["source_rows"], dataset["entries"]) == (83, 80)
    assert dataset["skipped_rows"] == {"no user turn": 2, "empty conversation": 1}
    assert (dataset["seed"], dataset["sample"], dataset["filters"]) == (4, "dataset", filters)
    assert (dataset["rows_used"], dataset["requests"]) == (len(kept), len(kept))
    assert dataset["lengths_counted_with"].startswith("estimate")
    (run_id,) = con.execute("SELECT run_id FROM runs").fetchone() or ("",)
    assert run_dataset(con, run_id) == dataset


def test_chat_jsonl_sampled_to_follow_the_mix(
    tmp_path: Path, tokenbench: Callable[..., CliResult]
) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_bytes(chat_jsonl(120))
    lines = [orjson.loads(line)["messages"] for line in chat_jsonl(120).splitlines()]
    # The prompt is the system message and the user's turn, joined as prompt_text does.
    prompt = _estimate(
        np.array([len(f"system: {m[0]['content']}\n\nuser: {m[1]['content']}") for m in lines])
    )
    workload = {"dataset": {"path": str(path), "sample": "mix"}, "mix": MIX}
    _, con = _run(tokenbench, tmp_path, workload, 60, seed=21)
    records = con.execute(
        "SELECT seq, dataset_row, planned_prompt_tokens, planned_output_tokens, "
        "completion_tokens, status FROM requests ORDER BY seq"
    ).fetchall()
    assert len(records) == 60 and all(r[5] == "ok" for r in records)
    generated = Workload.model_validate({"mix": MIX})
    for seq, row, planned_prompt, planned_output, completion, _ in records:
        drawn = plan_request(generated, 21, 0, seq)  # the mix's lengths for this request
        assert (
            abs(planned_prompt - drawn.prompt_tokens) == np.abs(prompt - drawn.prompt_tokens).min()
        )
        assert planned_prompt == prompt[row]
        assert planned_output == completion == drawn.output_tokens


def test_parquet_with_mapped_columns_and_a_hub_dataset_from_the_cache(
    tmp_path: Path, tokenbench: Callable[..., CliResult]
) -> None:
    table = prompts_table(40)
    cache = hub_cache(
        tmp_path / "hf", "acme/questions", {"data/train-0.parquet": parquet_bytes(table)}
    )
    columns = {"prompt": "question", "output_tokens": "answer_len"}
    env = _local_env(HF_HUB_CACHE=str(cache), HF_HUB_OFFLINE="1")
    for source, origin in (
        ({"hub": "acme/questions", "split": "train"}, f"hub:acme/questions@{HUB_COMMIT}"),
        ({"path": str(tmp_path / "questions.parquet")}, str(tmp_path / "questions.parquet")),
    ):
        (tmp_path / "questions.parquet").write_bytes(parquet_bytes(table, row_group_size=9))
        workload = {"dataset": {**source, "columns": columns, "replacement": True}}
        run_dir = tmp_path / origin.replace("/", "_").replace(":", "_")
        run_dir.mkdir()
        report, con = _run(tokenbench, run_dir, workload, 30, env=env)
        records = con.execute(
            "SELECT dataset_row, planned_prompt_tokens, planned_output_tokens, "
            "completion_tokens FROM requests ORDER BY seq"
        ).fetchall()
        prompt = _estimate(np.array([len(q) for q in table["question"].to_pylist()]))
        answers = table["answer_len"].to_pylist()
        assert len(records) == 30
        for row, planned_prompt, planned_output, completion in records:
            assert planned_prompt == prompt[row]
            assert planned_output == completion == answers[row]
        assert len({r[0] for r in records}) < 30  # drawn with replacement: repeats
        assert report["dataset"]["origin"] == origin
        assert report["dataset"]["source_format"].endswith("/columns")
        con.close()


# --------------------------------------------------------------------------- over REST


@pytest.fixture(scope="module")
def api(
    eu_worker: Proc, worker_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[httpx.Client]:
    tmp = tmp_path_factory.mktemp("workload-datasets")
    proc, base = start_control_plane(worker_env, tmp / "api.duckdb", tmp / "api.log")
    with httpx.Client(
        base_url=base, headers={"authorization": f"Bearer {API_TOKEN}"}, timeout=60
    ) as client:
        yield client
    proc.stop()


def _scenario(dataset: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "rest-dataset",
        "seed": 2,
        "providers": [SIM],
        "workload": {"dataset": dataset},
        "load": {"concurrency": [2], "requests_per_level": 12},
        "regions": ["eu"],
    }


def test_an_uploaded_parquet_file_is_converted_and_run(api: httpx.Client) -> None:
    table = prompts_table(25)
    data = parquet_bytes(table)
    params = {"prompt_column": "question", "output_tokens_column": "answer_len", "name": "q.pq"}
    headers = {"content-type": "application/vnd.apache.parquet"}
    uploaded = api.post("/v1/datasets", content=data, params=params, headers=headers)
    assert uploaded.status_code == 201, uploaded.text
    info = uploaded.json()
    assert (info["entries"], info["source_rows"], info["source_format"]) == (
        25,
        25,
        "parquet/columns",
    )
    assert info["source_sha256"] == hashlib.sha256(data).hexdigest()
    assert info["conversion"] == {
        "format": "auto",
        "columns": {"prompt": "question", "output_tokens": "answer_len"},
    }
    again = api.post("/v1/datasets", content=data, params=params, headers=headers)
    assert again.status_code == 200 and again.json()["id"] == info["id"]
    filters = {"max_prompt_tokens": 100}
    created = api.post(
        "/v1/runs", json={"scenario": _scenario({"dataset": info["id"], "filters": filters})}
    )
    assert created.status_code == 201, created.text
    view = wait_for_run(api, created.json()["id"])
    assert view["state"] == "finished", view
    answer = api.get(f"/v1/runs/{view['id']}/records")
    records = pa.ipc.open_stream(io.BytesIO(answer.content)).read_all().sort_by("seq")
    prompt = _estimate(np.array([len(q) for q in table["question"].to_pylist()]))
    kept = set(np.flatnonzero(prompt <= 100).tolist())
    rows = records.column("dataset_row").to_pylist()
    assert set(rows) <= kept and len(rows) == 12 == len(set(rows))  # 12 of the kept, once
    assert records.column("dataset_id").to_pylist() == [info["id"]] * 12
    assert records.column("planned_output_tokens").to_pylist() == [
        table["answer_len"][row].as_py() for row in rows
    ]
    report = api.get(f"/v1/runs/{view['id']}/report").json()
    assert report["dataset"]["dataset_id"] == info["id"]
    assert report["dataset"]["filters"] == filters


def test_rest_scenarios_name_uploaded_datasets_only(api: httpx.Client) -> None:
    for dataset, field in (
        ({"path": "/etc/passwd"}, "path"),
        ({"path": "sharegpt.json", "columns": {"prompt": "q"}}, "path"),
        ({"hub": "acme/questions"}, "hub"),
        ({"dataset": "ds-" + "0" * 64}, "dataset"),
    ):
        answer = api.post("/v1/runs", json={"scenario": _scenario(dataset)})
        assert answer.status_code == 422, answer.text
        locations = [tuple(d["loc"]) for d in answer.json()["detail"]]
        assert ("scenario", "workload", "dataset", field) in locations, answer.text
    # Bad uploads are refused with the reason; query parameters are bounded.
    bad = api.post(
        "/v1/datasets",
        content=orjson.dumps([{"conversations": []}]),
        headers={"content-type": "application/json"},
    )
    assert bad.status_code == 422 and "no row can be a prompt" in bad.text
    long_column = api.post(
        "/v1/datasets",
        content=b"[]",
        params={"prompt_column": "x" * 300},
        headers={"content-type": "application/json"},
    )
    assert long_column.status_code == 422
    assert long_column.json()["detail"][0]["loc"] == ["query", "prompt_column"]
