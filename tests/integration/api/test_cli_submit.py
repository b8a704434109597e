"""api/cli/commands/submit.py against the served control plane: a scenario is submitted (its
local workload files uploaded as datasets first), and each refusal of the control plane
becomes the CLI's message and exit code (2 for the input, 1 when operational)."""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import typer
import yaml
from typer.testing import CliRunner, Result

from api.cli.commands.submit import submit
from api.local.redis_server import free_port
from tests.conftest import API_TOKEN
from tests.integration.api.conftest import RestStack, lonely_region, run_scenario
from tests.support.dataset_files import parquet_bytes, prompts_table

pytestmark = pytest.mark.integration

app = typer.Typer()
app.command()(submit)  # the only command: invoked with its arguments alone


def _submit(stack: RestStack, scenario: dict[str, Any], tmp: Path, *options: str) -> Result:
    path = tmp / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario))
    args = [str(path), "--server", stack.base, "--token", API_TOKEN, *options]
    return CliRunner().invoke(app, args, env={"TOKENBENCH_TOKEN": None})


def test_a_run_is_submitted_with_its_local_prompt_file(
    rest_stack: RestStack, tmp_path: Path
) -> None:
    prompts = tmp_path / "prompts.jsonl"
    content = "".join(json.dumps({"prompt": f"{uuid.uuid4().hex} {i}"}) + "\n" for i in range(3))
    prompts.write_text(content)
    scenario = run_scenario(lonely_region())
    scenario["workload"]["prompts"] = {"path": str(prompts)}
    shown = _submit(rest_stack, scenario, tmp_path, "--wait-for-workers")
    assert shown.exit_code == 0, shown.output
    run_id = shown.stdout.strip().splitlines()[-1]
    assert f"run {run_id} submitted" in shown.stderr
    try:
        assert rest_stack.client.get(f"/v1/runs/{run_id}").json()["state"] == "running"
        # The file went up as a dataset; the control plane read no path.
        dataset_id = "ds-" + hashlib.sha256(content.encode()).hexdigest()
        assert rest_stack.client.get(f"/v1/datasets/{dataset_id}").status_code == 200
    finally:
        rest_stack.client.post(f"/v1/runs/{run_id}/cancel")


def test_a_local_dataset_file_is_uploaded_with_its_columns(
    rest_stack: RestStack, tmp_path: Path
) -> None:
    table = tmp_path / "questions.parquet"
    # The same questions every run (converted, they fit the stack's dataset limit), in a
    # file of this test's own: its uid column starts at a random offset.
    questions = prompts_table(9)
    offset = uuid.uuid4().int % 1_000_000_000
    questions = questions.set_column(0, "uid", pa.array(range(offset, offset + 9)))
    table.write_bytes(parquet_bytes(questions))
    scenario = run_scenario(lonely_region())
    scenario["workload"]["dataset"] = {
        "path": str(table),
        "columns": {"prompt": "question", "output_tokens": "answer_len"},
    }
    shown = _submit(rest_stack, scenario, tmp_path, "--wait-for-workers")
    assert shown.exit_code == 0, shown.output
    run_id = shown.stdout.strip().splitlines()[-1]
    try:
        assert rest_stack.client.get(f"/v1/runs/{run_id}").json()["state"] == "running"
        # Uploaded, and converted by the control plane with the columns the scenario named.
        sha = hashlib.sha256(table.read_bytes()).hexdigest()
        (info,) = [
            d for d in rest_stack.client.get("/v1/datasets").json() if d["source_sha256"] == sha
        ]
        assert info["conversion"]["columns"] == {
            "prompt": "question",
            "output_tokens": "answer_len",
        }
        assert (info["entries"], info["origin"]) == (9, str(table))
    finally:
        rest_stack.client.post(f"/v1/runs/{run_id}/cancel")
    missing = run_scenario(lonely_region())
    missing["workload"]["dataset"] = {"path": str(table), "columns": {"prompt": "nope"}}
    refused = _submit(rest_stack, missing, tmp_path, "--wait-for-workers")
    assert refused.exit_code == 2, refused.output
    assert "workload.dataset.path" in refused.stderr and "no column 'nope'" in refused.stderr


def test_a_prompt_file_given_as_a_replay_log_is_bad_input(
    rest_stack: RestStack, tmp_path: Path
) -> None:
    log = tmp_path / "not-a-log.jsonl"
    log.write_text(json.dumps({"prompt": uuid.uuid4().hex}) + "\n")
    scenario = run_scenario(lonely_region())
    del scenario["workload"]["mix"], scenario["load"]["concurrency"]
    scenario["workload"]["replay"] = {"path": str(log)}
    shown = _submit(rest_stack, scenario, tmp_path, "--wait-for-workers")
    assert shown.exit_code == 2, shown.output
    assert f"workload.replay.path: {log} cannot be replayed" in shown.stderr


def test_refusals_of_the_control_plane_keep_their_kind(
    rest_stack: RestStack, tmp_path: Path
) -> None:
    region = lonely_region()
    no_worker = _submit(rest_stack, run_scenario(region), tmp_path)
    assert no_worker.exit_code == 2  # the input names a region nobody serves
    assert f"HTTP 409: no live worker in region(s): {region}" in no_worker.stderr

    metadata = run_scenario(region)
    metadata["providers"][0] = {
        "name": "meta",
        "kind": "openai",
        "base_url": "http://169.254.169.254/v1",
        "model": "m",
    }
    refused = _submit(rest_stack, metadata, tmp_path, "--wait-for-workers")
    assert refused.exit_code == 2
    assert "HTTP 422: scenario.providers.0.base_url: " in refused.stderr

    path = tmp_path / "scenario.yaml"
    wrong_token = CliRunner().invoke(
        app,
        [str(path), "--server", rest_stack.base, "--token", "wrong"],
        env={"TOKENBENCH_TOKEN": None},
    )
    assert wrong_token.exit_code == 1  # operational: the scenario may well be fine
    assert "HTTP 401: missing, unknown, expired or revoked bearer token" in wrong_token.stderr


def test_an_unreachable_control_plane_is_operational(tmp_path: Path) -> None:
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(run_scenario(lonely_region())))
    server = f"http://127.0.0.1:{free_port()}"
    shown = CliRunner().invoke(app, [str(path), "--server", server], env={"TOKENBENCH_TOKEN": None})
    assert shown.exit_code == 1
    assert f"cannot reach {server}" in shown.stderr


def test_regions_override_the_scenarios(rest_stack: RestStack, tmp_path: Path) -> None:
    first, second = lonely_region(), lonely_region()
    scenario = run_scenario("written-in-the-file")
    shown = _submit(
        rest_stack, scenario, tmp_path, "--regions", f"{first}, {second}", "--wait-for-workers"
    )
    assert shown.exit_code == 0, shown.output
    run_id = shown.stdout.strip().splitlines()[-1]
    try:
        view = rest_stack.client.get(f"/v1/runs/{run_id}").json()
        regions = {shard["region"] for stage in view["stages"] for shard in stage["shards"]}
        assert regions == {first, second}
    finally:
        rest_stack.client.post(f"/v1/runs/{run_id}/cancel")

    # Without --wait-for-workers the override is checked like the file's regions.
    lonely = lonely_region()
    refused = _submit(rest_stack, scenario, tmp_path, "--regions", lonely)
    assert refused.exit_code == 2
    assert f"HTTP 409: no live worker in region(s): {lonely}" in refused.stderr
    for bad, message in ((" , ", "--regions takes one or more names"), ("bad name!", "HTTP 422")):
        invalid = _submit(rest_stack, scenario, tmp_path, "--regions", bad, "--wait-for-workers")
        assert invalid.exit_code == 2, invalid.output
        assert message in invalid.stderr
