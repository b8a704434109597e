"""The REST control plane with real processes: uvicorn, Redis, workers in two regions."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import API_TOKEN, CliResult, Proc, start_control_plane, wait_for_run

pytestmark = pytest.mark.integration


def scenario(regions: list[str], requests: int = 12, **simulate: float) -> dict[str, Any]:
    return {
        "name": "rest",
        "providers": [
            {
                "name": "sim",
                "kind": "simulated",
                "simulate": {"ttft_ms": 20, "itl_ms": 2, **simulate},
            }
        ],
        "workload": {
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": 16},
                    "output_tokens": {"dist": "fixed", "value": 8},
                }
            ]
        },
        "load": {"concurrency": [2, 4], "requests_per_level": requests},
        "regions": regions,
    }


@pytest.fixture(scope="module")
def control_plane(
    eu_worker: Proc,
    us_worker: Proc,
    worker_env: dict[str, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[httpx.Client]:
    tmp = tmp_path_factory.mktemp("api")
    proc, base = start_control_plane(worker_env, tmp / "api.duckdb", tmp / "api.log")
    with httpx.Client(
        base_url=base, headers={"authorization": f"Bearer {API_TOKEN}"}, timeout=30
    ) as client:
        yield client
    proc.stop()


def test_submit_poll_report_and_records_from_two_regions(control_plane: httpx.Client) -> None:
    stored = control_plane.post(
        "/v1/scenarios",
        content=_yaml(scenario(["eu", "us"])),
        headers={"content-type": "application/yaml"},
    )
    assert stored.status_code == 201, stored.text
    scenario_id = stored.json()["id"]
    assert control_plane.get(f"/v1/scenarios/{scenario_id}").json()["scenario"]["name"] == "rest"
    assert scenario_id in [s["id"] for s in control_plane.get("/v1/scenarios").json()]

    created = control_plane.post("/v1/runs", json={"scenario_id": scenario_id})
    assert created.status_code == 201, created.text
    assert created.json()["shards"] == 4  # 2 stages × 1 provider × 2 regions
    run_id = created.json()["id"]
    view = wait_for_run(control_plane, run_id)
    assert view["state"] == "finished"
    assert view["requests_done"] == view["requests_planned"] == 48
    assert [s["state"] for s in view["stages"]] == ["finished", "finished"]

    report = control_plane.get(f"/v1/runs/{run_id}/report").json()
    assert {(r["region"], r["stage"]) for r in report["stages"]} == {
        ("eu", 0),
        ("eu", 1),
        ("us", 0),
        ("us", 1),
    }

    arrow = control_plane.get(
        f"/v1/runs/{run_id}/records", headers={"accept": "application/vnd.apache.arrow.stream"}
    )
    assert arrow.headers["content-type"] == "application/vnd.apache.arrow.stream"
    table = pa.ipc.open_stream(arrow.content).read_all()
    assert table.num_rows == 48
    assert set(table.column("region").to_pylist()) == {"eu", "us"}
    parquet = control_plane.get(f"/v1/runs/{run_id}/records?format=parquet")
    assert pq.read_table(io.BytesIO(parquet.content)).num_rows == 48
    assert run_id in [r["id"] for r in control_plane.get("/v1/runs").json()]


def test_auth_is_required_except_for_health(control_plane: httpx.Client) -> None:
    base = str(control_plane.base_url)
    assert httpx.get(f"{base}/v1/runs").status_code == 401
    assert (
        httpx.get(f"{base}/v1/runs", headers={"authorization": "Bearer wrong"}).status_code == 401
    )
    assert httpx.get(f"{base}/metrics").status_code == 401
    assert httpx.get(f"{base}/healthz").status_code == 200
    ready = httpx.get(f"{base}/readyz")
    assert ready.status_code == 200
    assert ready.json()["workers"]["eu"] >= 1
    metrics = control_plane.get("/metrics")
    assert "tokenbench_requests_recorded" in metrics.text
    assert "tokenbench_control_step_errors_total 0.0" in metrics.text


def test_broken_scenario_is_422_with_field_paths(control_plane: httpx.Client) -> None:
    broken = scenario(["eu"])
    broken["providers"][0]["simulate"]["ttft_ms"] = -1
    broken["load"]["concurrency"] = "many"
    answer = control_plane.post("/v1/runs", json={"scenario": broken})
    assert answer.status_code == 422
    locs = [tuple(d["loc"]) for d in answer.json()["detail"]]
    assert ("scenario", "providers", 0, "simulate", "ttft_ms") in locs
    assert ("scenario", "load", "concurrency") in locs
    yaml_answer = control_plane.post("/v1/scenarios", content=b"name: x\nproviders: [\n")
    assert yaml_answer.status_code == 422
    assert yaml_answer.json()["detail"][0]["line"] is not None


def test_unknown_region_is_409_and_unknown_run_404(control_plane: httpx.Client) -> None:
    answer = control_plane.post("/v1/runs", json={"scenario": scenario(["eu", "mars"])})
    assert answer.status_code == 409
    assert answer.json()["regions"] == ["mars"]
    assert control_plane.get("/v1/runs/nope").status_code == 404
    assert control_plane.get("/v1/runs/nope/report").status_code == 404


def test_egress_policy_refuses_cloud_metadata_urls(control_plane: httpx.Client) -> None:
    bad = scenario(["eu"])
    bad["providers"].append(
        {"name": "meta", "kind": "openai", "base_url": "http://169.254.169.254/v1", "model": "m"}
    )
    answer = control_plane.post("/v1/runs", json={"scenario": bad})
    assert answer.status_code == 422
    assert answer.json()["detail"][0]["loc"] == ["scenario", "providers", 1, "base_url"]


def test_a_provider_failing_every_request_does_not_fail_the_run(
    control_plane: httpx.Client,
) -> None:
    created = control_plane.post("/v1/runs", json={"scenario": scenario(["eu"], error_rate=1.0)})
    view = wait_for_run(control_plane, created.json()["id"])
    assert view["state"] == "finished"
    assert view["errors"] == view["requests_done"] == 24


def test_body_size_is_bounded(control_plane: httpx.Client) -> None:
    answer = control_plane.post("/v1/scenarios", content=b"x" * 2_000_000)
    assert answer.status_code == 413


def _yaml(data: dict[str, Any]) -> bytes:
    import yaml

    return yaml.safe_dump(data).encode()


def test_submit_command_waits_and_prints_the_report(
    control_plane: httpx.Client, tmp_path: Path, tokenbench: Callable[..., CliResult]
) -> None:
    path = tmp_path / "s.yaml"
    path.write_bytes(_yaml(scenario(["eu", "us"], requests=6)))
    server = str(control_plane.base_url).rstrip("/")
    result = tokenbench(
        "submit", str(path), "--server", server, "--token", API_TOKEN, "--wait", "--format", "json"
    )
    assert result.code == 0, result.stderr
    report = json.loads(result.stdout[result.stdout.index("{") :])
    assert report["state"] == "finished"
    assert sum(row["requests"] for row in report["stages"]) == 24
    refused = tokenbench("submit", str(path), "--server", server, "--token", "wrong")
    assert refused.code == 1
    assert "HTTP 401" in refused.stderr and "Traceback" not in refused.stderr
