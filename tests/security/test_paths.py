"""No server-side paths from remote submitters (issue: read files on the control plane
and on workers).

A REST scenario naming ``workload.replay.path`` or ``workload.prompts.path`` is refused
with a 422 at that field, with the same message whatever the path is (a regular file,
a FIFO, a directory, nothing at all), so the answer is no oracle of the service's
files; nothing of those files reaches the attacker's server, and the control plane
stays healthy.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.catcher import Catcher
from tests.security.conftest import HostileStack, scenario_with

pytestmark = pytest.mark.integration

PASSWD_MARK = b"root:"


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    """A FIFO nobody ever writes to: opening it for reading blocks forever."""
    path = tmp_path / "never.fifo"
    os.mkfifo(path)
    return path


def _catcher_provider(catcher: Catcher) -> dict[str, Any]:
    # Where prompts would go if a file were read and sent: the attacker's server.
    return {"name": "thief", "kind": "openai", "base_url": f"{catcher.url}/v1", "model": "m"}


def _replay(path: str, catcher: Catcher) -> dict[str, Any]:
    return scenario_with(_catcher_provider(catcher), workload={"replay": {"path": path}}, load={})


def _prompts(path: str, catcher: Catcher) -> dict[str, Any]:
    return scenario_with(
        _catcher_provider(catcher),
        workload={
            "prompts": {"path": path},
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": 4},
                    "output_tokens": {"dist": "fixed", "value": 2},
                }
            ],
        },
    )


def _paths(fifo: Path, tmp_path: Path) -> list[str]:
    return [
        "/etc/passwd",
        "/etc/hostname",
        str(fifo),
        str(tmp_path),  # a directory
        str(tmp_path / "does-not-exist.jsonl"),
        "../../../../etc/passwd",
    ]


@pytest.mark.parametrize("field", ["replay", "prompts"])
def test_rest_scenario_naming_a_path_is_refused_without_an_oracle(
    hostile_stack: HostileStack, catcher: Catcher, fifo: Path, tmp_path: Path, field: str
) -> None:
    build = _replay if field == "replay" else _prompts
    answers = []
    for path in _paths(fifo, tmp_path):
        scenario = build(path, catcher)
        for route, body in (
            ("/v1/runs", {"scenario": scenario}),
            ("/v1/scenarios", scenario),
        ):
            answer = hostile_stack.client.post(route, json=body)
            assert answer.status_code == 422, (route, path, answer.text)
            detail = answer.json()["detail"]
            assert [d["loc"] for d in detail] == [["scenario", "workload", field, "path"]]
            assert "POST /v1/datasets" in detail[0]["msg"]
            assert path not in answer.text
            answers.append(answer.content)
    # Byte-identical answers whatever the path: no existence, type or permission oracle.
    assert len(set(answers)) == 1, set(answers)
    received = catcher.received()
    assert PASSWD_MARK not in received
    assert catcher.requests == []
    hostile_stack.assert_healthy()


def test_fifo_path_does_not_freeze_the_api(
    hostile_stack: HostileStack, catcher: Catcher, fifo: Path
) -> None:
    # Before: the planner opened the FIFO on the event loop and the whole API froze.
    for _ in range(3):
        answer = hostile_stack.client.post(
            "/v1/runs", json={"scenario": _replay(str(fifo), catcher)}, timeout=10
        )
        assert answer.status_code == 422, answer.text
    hostile_stack.assert_healthy()


def test_path_in_a_stored_scenario_cannot_be_run(
    hostile_stack: HostileStack, catcher: Catcher
) -> None:
    # A stored scenario with a path cannot exist (POST /v1/scenarios refuses it); a run of
    # an inline one with overrides is checked after the overrides are applied.
    answer = hostile_stack.client.post(
        "/v1/runs",
        json={
            "scenario": _prompts("/etc/passwd", catcher),
            "overrides": {"requests_per_level": 1},
        },
    )
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"][0]["loc"] == ["scenario", "workload", "prompts", "path"]
    assert PASSWD_MARK not in catcher.received()
    hostile_stack.assert_healthy()


def test_unknown_or_unsuitable_dataset_is_refused_at_its_field(
    hostile_stack: HostileStack, catcher: Catcher
) -> None:
    unknown = "ds-" + "0" * 64
    answer = hostile_stack.client.post(
        "/v1/runs",
        json={
            "scenario": scenario_with(
                _catcher_provider(catcher), workload={"replay": {"dataset": unknown}}, load={}
            )
        },
    )
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"][0]["loc"] == ["scenario", "workload", "replay", "dataset"]
    # A prompts-only dataset (no timestamps) cannot be replayed.
    uploaded = hostile_stack.client.post(
        "/v1/datasets",
        content=b'{"prompt": "hello"}\n',
        headers={"content-type": "application/x-ndjson"},
    )
    assert uploaded.status_code in (200, 201), uploaded.text
    assert uploaded.json()["kinds"] == ["prompts"]
    answer = hostile_stack.client.post(
        "/v1/scenarios",
        json=scenario_with(
            _catcher_provider(catcher),
            workload={"replay": {"dataset": uploaded.json()["id"]}},
            load={},
        ),
    )
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"][0]["loc"] == ["scenario", "workload", "replay", "dataset"]
    assert "timestamp" in answer.json()["detail"][0]["msg"]
    assert catcher.requests == []
    hostile_stack.assert_healthy()


def test_dataset_upload_is_bounded_and_validated(hostile_stack: HostileStack) -> None:
    bad = hostile_stack.client.post(
        "/v1/datasets",
        content=b'{"prompt": "ok"}\n{"prompt": \n',
        headers={"content-type": "application/x-ndjson"},
    )
    assert bad.status_code == 422, bad.text
    assert "line 2" in bad.text
    not_text = hostile_stack.client.post(
        "/v1/datasets",
        content=b"\xff\xfe" * 10,
        headers={"content-type": "application/octet-stream"},
    )
    assert not_text.status_code == 422, not_text.text
    wrong_type = hostile_stack.client.post(
        "/v1/datasets", content=b'{"prompt": "ok"}\n', headers={"content-type": "text/html"}
    )
    assert wrong_type.status_code == 415, wrong_type.text
    hostile_stack.assert_healthy()


def _with_tokenizer(path: str, catcher: Catcher) -> dict[str, Any]:
    scenario = _prompts("unused", catcher)
    scenario["workload"] = {"mix": scenario["workload"]["mix"], "tokenizer": {"path": path}}
    return scenario


def _simulator_tokenizer(path: str, catcher: Catcher) -> dict[str, Any]:
    scenario = _with_tokenizer("unused", catcher)
    scenario["workload"].pop("tokenizer")
    scenario["providers"] = [
        {"name": "sim", "kind": "simulated", "simulate": {"prompt_tokenizer": {"path": path}}}
    ]
    return scenario


@pytest.mark.parametrize(
    ("build", "loc"),
    [
        (_with_tokenizer, ["scenario", "workload", "tokenizer", "path"]),
        (
            _simulator_tokenizer,
            ["scenario", "providers", 0, "simulate", "prompt_tokenizer", "path"],
        ),
    ],
)
def test_rest_scenario_naming_a_tokenizer_path_is_refused_at_the_field(
    hostile_stack: HostileStack,
    catcher: Catcher,
    fifo: Path,
    tmp_path: Path,
    build: Any,
    loc: list[Any],
) -> None:
    answers = []
    for path in _paths(fifo, tmp_path):
        for route, body in (
            ("/v1/runs", {"scenario": build(path, catcher)}),
            ("/v1/scenarios", build(path, catcher)),
        ):
            answer = hostile_stack.client.post(route, json=body)
            assert answer.status_code == 422, (route, path, answer.text)
            assert [d["loc"] for d in answer.json()["detail"]] == [loc]
            assert path not in answer.text
            answers.append(answer.content)
    assert len(set(answers)) == 1, set(answers)  # no oracle of the service's files
    assert catcher.requests == []
    hostile_stack.assert_healthy()
