"""``tokenbench providers check``: one probe per provider against the fake servers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from api.cli.commands.providers import providers_app
from api.local.redis_server import free_port
from tests.fakes.provider_server import KEY, FakeProviders

pytestmark = pytest.mark.integration

# Registered the way api/cli/app.py does it, so the command line under test is the real one.
app = typer.Typer()
app.add_typer(providers_app, name="providers")


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProviders]:
    server = FakeProviders().start()
    yield server
    server.stop()


def write(path: Path, providers: list[dict[str, object]]) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "name": "check",
                "providers": providers,
                "workload": {
                    "mix": [
                        {
                            "prompt_tokens": {"dist": "fixed", "value": 8},
                            "output_tokens": {"dist": "fixed", "value": 4},
                        }
                    ]
                },
                "load": {"concurrency": [1], "requests_per_level": 1},
            }
        )
    )
    return path


def test_check_reports_each_provider(fake: FakeProviders, tmp_path: Path) -> None:
    scenario = write(
        tmp_path / "s.yaml",
        [
            {
                "name": "good",
                "kind": "openai",
                "base_url": fake.url("ok", "/v1"),
                "model": "m",
                "api_key_env": "FAKE_KEY",
            },
            {
                "name": "tgi-no-usage",
                "kind": "replicate",
                "base_url": fake.url("ok", "/v1"),
                "model": "meta/x",
                "api_key_env": "FAKE_KEY",
            },
            {
                "name": "bad-key",
                "kind": "llamacpp",
                "base_url": fake.url("ok"),
                "api_key_env": "WRONG_KEY",
            },
            {
                "name": "no-model",
                "kind": "azure-openai",
                "endpoint": fake.url("ok"),
                "model": "gpt-9",
                "api_key_env": "FAKE_KEY",
            },
            {
                "name": "unset",
                "preset": "groq",
                "model": "llama-3.1-8b-instant",
                "api_key_env": "UNSET_VARIABLE_XYZ",
            },
            {
                "name": "down",
                "kind": "tgi",
                "base_url": f"http://127.0.0.1:{free_port()}",
                "connect_timeout_s": 2,
            },
        ],
    )
    env = {"FAKE_KEY": KEY, "WRONG_KEY": "sk-wrong-0123456789abcdef"}
    result = CliRunner().invoke(app, ["providers", "check", str(scenario), "--json"], env=env)
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    rows = {row["provider"]: row for row in json.loads(result.stdout)}
    good = rows["good"]
    assert (good["passed"], good["streaming"], good["usage"]) == (True, True, True)
    assert good["ttft_ms"] is not None
    # Replicate streams but reports no usage in the stream: passes, says so.
    assert rows["tgi-no-usage"]["passed"] and rows["tgi-no-usage"]["streaming"]
    assert (rows["bad-key"]["reachable"], rows["bad-key"]["auth"]) == (True, False)
    assert "sk-wrong-0123456789abcdef" not in result.output
    assert (rows["no-model"]["auth"], rows["no-model"]["model"]) == (True, False)
    assert rows["unset"]["keys"] is False
    assert "UNSET_VARIABLE_XYZ is not set" in rows["unset"]["message"]
    assert rows["down"]["reachable"] is False


def test_all_good_exits_zero_with_a_table(fake: FakeProviders, tmp_path: Path) -> None:
    scenario = write(
        tmp_path / "s.yaml", [{"name": "llama", "kind": "llamacpp", "base_url": fake.url("ok")}]
    )
    result = CliRunner().invoke(app, ["providers", "check", str(scenario)])
    assert result.exit_code == 0, result.output
    assert "llama" in result.output and "yes" in result.output


def test_bad_scenario_exits_two_without_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nproviders: [{preset: nope, model: m}]\n")
    result = CliRunner().invoke(app, ["providers", "check", str(bad)])
    assert result.exit_code == 2
    assert "unknown preset 'nope'" in result.output and "Traceback" not in result.output
