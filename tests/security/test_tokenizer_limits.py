"""Hostile tokenizers: a ``tokenizer.json`` whose pre-tokenizer regex backtracks
catastrophically is refused at upload (422) and, forced in past the upload, fails the
shard that would use it with its name instead of hanging it; a hub revision cannot walk
paths (422 with its field).

The hostile tokenizer is real (tests/support/hostile_tokenizer.py): Oniguruma, the
tokenizers library's regex engine, spends tens of milliseconds a character on it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
import redis
from tokenizers import Tokenizer

from scenarios.tokenizers.files import TokenizerUnavailable
from scenarios.tokenizers.probe import check_tokenizer, count_in_child
from scenarios.tokenizers.ref import TokenizerRef
from scenarios.wire.contract import dataset_key
from tests.security.conftest import HostileStack, scenario_with, simulated
from tests.support.hostile_tokenizer import (
    TARGETED_TEXT,
    benign_tokenizer,
    hostile_tokenizer,
    targeted_tokenizer,
)
from workers.prompts.tokenizer import load_local_tokenizer

pytestmark = pytest.mark.integration

MIX = [
    {"prompt_tokens": {"dist": "fixed", "value": 8}, "output_tokens": {"dist": "fixed", "value": 2}}
]


def upload(stack: HostileStack, content: bytes) -> Any:
    return stack.client.post(
        "/v1/datasets",
        content=content,
        headers={"content-type": "application/json"},
        timeout=120,
    )


def no_probe_left() -> bool:
    """No tokenizer check process is left among this test's descendants (the control
    plane's and the worker's included)."""
    for child in psutil.Process().children(recursive=True):
        try:
            if "scenarios.tokenizers.probe" in child.cmdline():
                return False
        except psutil.NoSuchProcess:
            continue
    return True


def test_the_regex_really_backtracks_in_the_tokenizers_library() -> None:
    # Measured, not assumed: a short text already costs the hostile tokenizer far more
    # than the same tokenizer with a plain pre-tokenizer (counted in steps of work,
    # compared with each other, never against a wall-clock bound).
    text = "The quick brown fox jumps over the lazy dog. " * 2
    hostile = Tokenizer.from_str(hostile_tokenizer().decode())
    benign = Tokenizer.from_str(benign_tokenizer().decode())
    started = time.perf_counter()
    benign.encode(text)
    benign_s = time.perf_counter() - started
    started = time.perf_counter()
    hostile.encode(text)
    hostile_s = time.perf_counter() - started
    assert hostile_s > 100 * benign_s


def test_a_tokenizer_that_outruns_its_budget_is_killed_and_refused() -> None:
    with pytest.raises(TokenizerUnavailable, match="did not finish encoding") as refused:
        check_tokenizer(hostile_tokenizer("budget"), "file hostile.json", timeout_s=2.0)
    assert "file hostile.json" in str(refused.value)
    assert no_probe_left()  # killed and reaped, not left running
    # Its well-behaved twin passes with the same budget.
    assert check_tokenizer(benign_tokenizer("budget"), "file benign.json", timeout_s=60.0) > 0


def test_a_local_hostile_tokenizer_fails_before_a_local_run_uses_it(tmp_path: Path) -> None:
    path = tmp_path / "tokenizer.json"
    path.write_bytes(hostile_tokenizer("local"))
    with pytest.raises(TokenizerUnavailable, match=str(path)):
        load_local_tokenizer(TokenizerRef(path=str(path)))
    assert no_probe_left()


def test_a_hostile_tokenizer_upload_is_a_422(hostile_stack: HostileStack) -> None:
    answer = upload(hostile_stack, hostile_tokenizer("upload"))
    assert answer.status_code == 422, answer.text
    (problem,) = answer.json()["detail"]
    assert problem["loc"] == ["body"]
    assert "refused" in problem["msg"]
    assert no_probe_left()
    hostile_stack.assert_healthy()
    # A well-behaved tokenizer is still stored.
    assert upload(hostile_stack, benign_tokenizer("upload")).status_code in (200, 201)


def test_a_hostile_tokenizer_forced_in_fails_the_shard_not_hangs_it(
    hostile_stack: HostileStack,
) -> None:
    # Stored as a well-behaved tokenizer, then swapped in Redis (what a worker reads):
    # the worker checks what it is about to use, not what was uploaded.
    stored = upload(hostile_stack, benign_tokenizer("forced"))
    assert stored.status_code in (200, 201), stored.text
    dataset_id = stored.json()["id"]
    client = redis.Redis.from_url(hostile_stack.redis_url)
    client.set(dataset_key(dataset_id), hostile_tokenizer("forced"), ex=3600)
    scenario = scenario_with(
        simulated(), workload={"mix": MIX, "tokenizer": {"dataset": dataset_id}}
    )
    answer = hostile_stack.client.post("/v1/runs", json={"scenario": scenario})
    assert answer.status_code == 201, answer.text
    view = hostile_stack.wait_for_run(answer.json()["id"], timeout_s=240)
    shards = [shard for stage in view["stages"] for shard in stage["shards"]]
    assert view["state"] == "failed", json.dumps(view)[:2000]
    assert all(shard["state"] == "failed" for shard in shards), shards
    for shard in shards:
        assert dataset_id in (shard["message"] or ""), shard
        assert "refused" in shard["message"], shard
    hostile_stack.assert_healthy()
    # The worker is not wedged: a normal run on it still finishes.
    normal = hostile_stack.client.post("/v1/runs", json={"scenario": scenario_with(simulated())})
    assert hostile_stack.wait_for_run(normal.json()["id"])["state"] == "finished"


def test_rows_counted_with_a_tokenizer_aimed_at_them_fail_not_hang() -> None:
    # The tokenizer passes its check (the probe holds no '§') but backtracks on the rows
    # a submitter wrote for it: the count runs in a child too, killed at its limit.
    data = targeted_tokenizer("rows")
    assert check_tokenizer(data, "file targeted.json") > 0
    tokenizer_json = Tokenizer.from_str(data.decode()).to_str()
    assert count_in_child(tokenizer_json, ["hello world"], "t") == [2]
    with pytest.raises(TokenizerUnavailable, match="did not finish counting 4 rows"):
        count_in_child(tokenizer_json, [TARGETED_TEXT] * 4, "file targeted.json")
    assert no_probe_left()


def test_a_dataset_aimed_at_its_tokenizer_fails_the_shard_over_rest(
    hostile_stack: HostileStack,
) -> None:
    tokenizer = upload(hostile_stack, targeted_tokenizer("rest"))
    assert tokenizer.status_code in (200, 201), tokenizer.text  # it passes the probe
    rows = b"".join(
        json.dumps({"prompt": f"{TARGETED_TEXT} {i}"}).encode() + b"\n" for i in range(4)
    )
    dataset = hostile_stack.client.post(
        "/v1/datasets", content=rows, headers={"content-type": "application/x-ndjson"}
    )
    assert dataset.status_code in (200, 201), dataset.text
    workload = {
        "mix": MIX,
        "dataset": {"dataset": dataset.json()["id"]},
        "tokenizer": {"dataset": tokenizer.json()["id"]},
    }
    answer = hostile_stack.client.post(
        "/v1/runs", json={"scenario": scenario_with(simulated(), workload=workload)}
    )
    assert answer.status_code == 201, answer.text
    view = hostile_stack.wait_for_run(answer.json()["id"], timeout_s=300)
    shards = [shard for stage in view["stages"] for shard in stage["shards"]]
    assert view["state"] == "failed", json.dumps(view)[:2000]
    for shard in shards:
        assert "did not finish counting" in (shard["message"] or ""), shard
        assert tokenizer.json()["id"] in shard["message"], shard
    assert no_probe_left()
    hostile_stack.assert_healthy()


@pytest.mark.parametrize("revision", ["..", "main/../../../etc", ".git", "a//b"])
def test_a_revision_that_walks_paths_is_a_422_with_its_field(
    hostile_stack: HostileStack, revision: str
) -> None:
    scenario = scenario_with(
        simulated(), workload={"mix": MIX, "tokenizer": {"hub": "gpt2", "revision": revision}}
    )
    answer = hostile_stack.client.post("/v1/scenarios", json=scenario)
    assert answer.status_code == 422, answer.text
    locs = [problem["loc"] for problem in answer.json()["detail"]]
    assert ["scenario", "workload", "tokenizer", "revision"] in locs or [
        "workload",
        "tokenizer",
        "revision",
    ] in locs, locs
