"""api/rest/routes/datasets.py through the served app: JSONL uploads stored by content,
validated line by line, capped in bytes, and usable by scenarios by id."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator

import pytest

from api.rest.routes import datasets
from tests.integration.api.conftest import (
    MAX_DATASET_BYTES,
    RestStack,
    lonely_region,
    run_scenario,
)

pytestmark = pytest.mark.integration

NDJSON = {"content-type": "application/x-ndjson"}


def _prompts(count: int) -> bytes:
    """A prompt file of its own (unique content, so a fresh id), with a comment line."""
    tag = uuid.uuid4().hex
    lines = ["# prompts", *(json.dumps({"prompt": f"{tag} {i}"}) for i in range(count))]
    return ("\n".join(lines) + "\n").encode()


def test_an_upload_is_stored_by_content(rest_stack: RestStack) -> None:
    client = rest_stack.client
    content = _prompts(3)
    first = client.post("/v1/datasets", content=content, headers=NDJSON)
    assert first.status_code == 201, first.text
    info = first.json()
    assert info["id"] == "ds-" + hashlib.sha256(content).hexdigest()
    assert info["bytes"] == len(content)
    assert info["entries"] == 3  # the comment line is not an entry
    assert info["kinds"] == ["prompts"]
    assert info["replay_problem"].startswith("line 2:")  # why it cannot be replayed

    again = client.post("/v1/datasets", content=content, headers=NDJSON)
    assert again.status_code == 200  # the same bytes: the same dataset, not a new one
    assert again.json() == info
    assert client.get(f"/v1/datasets/{info['id']}").json() == info
    assert info["id"] in [d["id"] for d in client.get("/v1/datasets").json()]


def test_a_traffic_log_can_be_replayed_and_a_prompt_file_cannot(rest_stack: RestStack) -> None:
    client = rest_stack.client
    tag = uuid.uuid4().hex
    log = "".join(
        json.dumps({"timestamp": i * 0.5, "prompt": f"{tag} {i}", "max_tokens": 4}) + "\n"
        for i in range(3)
    ).encode()
    replayable = client.post("/v1/datasets", content=log, headers=NDJSON).json()
    assert set(replayable["kinds"]) == {"prompts", "replay"}
    assert replayable["replay_problem"] is None
    prompts_only = client.post("/v1/datasets", content=_prompts(2), headers=NDJSON).json()

    def replay_of(dataset_id: str) -> dict[str, object]:
        scenario = run_scenario(lonely_region(), levels=())
        del scenario["workload"]["mix"], scenario["load"]["concurrency"]
        scenario["workload"]["replay"] = {"dataset": dataset_id}
        return scenario

    assert client.post("/v1/scenarios", json=replay_of(replayable["id"])).status_code == 201
    refused = client.post("/v1/scenarios", json=replay_of(prompts_only["id"]))
    assert refused.status_code == 422
    assert refused.json()["detail"][0]["loc"] == ["scenario", "workload", "replay", "dataset"]
    assert "cannot be replayed" in refused.json()["detail"][0]["msg"]


@pytest.mark.parametrize("media", datasets.MEDIA_TYPES)
def test_each_jsonl_media_type_is_accepted(rest_stack: RestStack, media: str) -> None:
    answer = rest_stack.client.post(
        "/v1/datasets", content=_prompts(1), headers={"content-type": f"{media}; charset=utf-8"}
    )
    assert answer.status_code == 201, answer.text


def test_bad_uploads_are_refused_with_the_reason(rest_stack: RestStack) -> None:
    client = rest_stack.client
    as_text = client.post(
        "/v1/datasets", content=_prompts(1), headers={"content-type": "text/plain"}
    )
    assert as_text.status_code == 415
    assert all(media in as_text.json()["detail"] for media in datasets.MEDIA_TYPES)

    broken = client.post("/v1/datasets", content=b'{"prompt": "ok"}\n{"prompt": \n', headers=NDJSON)
    assert broken.status_code == 422
    [problem] = broken.json()["detail"]
    assert problem["loc"] == ["body"] and problem["line"] == 2

    unknown = client.get("/v1/datasets/ds-" + "0" * 64)
    assert unknown.status_code == 404
    assert unknown.json()["error"] == "not_found"


def test_uploads_are_capped_in_bytes_with_or_without_a_length(rest_stack: RestStack) -> None:
    line = json.dumps({"prompt": "x" * 100}).encode() + b"\n"
    too_big = line * (MAX_DATASET_BYTES // len(line) + 1)
    expected = {
        "detail": f"request body larger than {MAX_DATASET_BYTES} bytes "
        "(TOKENBENCH__API__MAX_DATASET_BYTES)",
        "error": "bad_input",
    }
    sized = rest_stack.client.post("/v1/datasets", content=too_big, headers=NDJSON)
    assert sized.status_code == 413
    assert sized.json() == expected

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        yield from (line for _ in range(MAX_DATASET_BYTES // len(line) + 1))

    streamed = rest_stack.client.post("/v1/datasets", content=chunks(), headers=NDJSON)
    assert streamed.status_code == 413
    assert streamed.json() == expected
