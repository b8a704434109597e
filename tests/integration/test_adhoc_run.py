"""`tokenbench run` as a script uses it: a scenario from flags, machine output alone on
stdout, and an exit code that says whether the figures are worth reading (docs/cli.md,
"Ad-hoc runs" and "Output and exit codes")."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from scenarios.loader import load_scenario
from tests.conftest import CliResult

pytestmark = pytest.mark.integration


def _env() -> dict[str, str]:
    # The embedded default: no Redis configured, the CLI starts its own.
    return {k: v for k, v in os.environ.items() if not k.startswith("TOKENBENCH__")}


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again when the block ends


def test_flags_build_a_scenario_that_runs_and_saves(
    tmp_path: Path,
    tokenbench: Callable[..., CliResult],
    simulate_endpoint: Callable[..., str],
) -> None:
    url = simulate_endpoint(ttft_ms=5, itl_ms=1)
    saved = tmp_path / "adhoc.yaml"
    result = tokenbench(
        "run", "--target", url.removesuffix("/v1"), "--model", "sim",
        "--concurrency", "1,2", "--requests", "6",
        "--prompt-tokens", "32", "--output-tokens", "8",
        "--save", str(saved), "--db", str(tmp_path / "a.duckdb"), "--format", "json",
        env=_env(),
    )  # fmt: skip
    assert result.code == 0, result.stderr
    report = json.loads(result.stdout)  # nothing but the report on stdout
    assert "scenario adhoc" in result.stderr  # the banner is a note, on stderr
    assert [(row["stage"], row["requests"], row["errors"]) for row in report["stages"]] == [
        (0, 6, 0),
        (1, 6, 0),
    ]
    scenario = load_scenario(saved)
    assert scenario.providers[0].model_dump(include={"kind", "base_url", "model"}) == {
        "kind": "openai",
        "base_url": url,  # a bare server gets /v1
        "model": "sim",
    }
    assert scenario.load.concurrency == [1, 2]

    # A file and flags combine: the flags override the file.
    again = tokenbench(
        "run", str(saved), "--concurrency", "3", "--requests", "4",
        "--db", str(tmp_path / "b.duckdb"), "--format", "json", env=_env(),
    )  # fmt: skip
    assert again.code == 0, again.stderr
    rows = json.loads(again.stdout)["stages"]
    assert [(row["concurrency"], row["requests"]) for row in rows] == [(3, 4)]


def test_a_run_whose_every_request_failed_exits_1_naming_the_stage(
    tmp_path: Path, tokenbench: Callable[..., CliResult]
) -> None:
    db = str(tmp_path / "f.duckdb")
    result = tokenbench(
        "run", "--target", f"http://127.0.0.1:{_closed_port()}", "--model", "m",
        "--concurrency", "2", "--requests", "6", "--db", db, "--format", "json", env=_env(),
    )  # fmt: skip
    assert result.code == 1
    report = json.loads(result.stdout)  # the report is still written, for the record
    stage = report["stages"][0]
    assert stage["errors"] == 6
    # Refusals are not throughput: nothing was served, however fast it was refused.
    assert stage["request_rate"] == 0 and stage["attempted_request_rate"] > 0
    (cause,) = report["errors"]  # why, redacted, with its count
    assert (cause["error_class"], cause["count"]) == ("connect", 6) and cause["message"]
    assert "target stage 0 (local): 6 of 6 requests failed (100.0 %)" in result.stderr
    assert "Traceback" not in result.stderr
    table = tokenbench("report", "--db", db, env=_env())
    assert table.code == 0, table.stderr
    text = " ".join(table.stdout.split())
    assert "Most frequent errors" in text
    assert f"6 connect {' '.join(cause['message'].split())}" in text


def test_max_error_rate_fails_a_run_above_the_limit_only(
    tmp_path: Path,
    tokenbench: Callable[..., CliResult],
    simulate_endpoint: Callable[..., str],
) -> None:
    # Half the requests fail: 30 draws, so fewer than 10 % failing is a 1-in-10^5 event.
    url = simulate_endpoint(ttft_ms=2, itl_ms=1, error_rate=0.5)
    args = [
        "run", "--target", url, "--model", "sim", "--concurrency", "2", "--requests", "30",
        "--prompt-tokens", "16", "--output-tokens", "4", "--format", "json",
    ]  # fmt: skip
    lenient = tokenbench(*args, "--db", str(tmp_path / "l.duckdb"), env=_env())
    assert lenient.code == 0, lenient.stderr  # by default only an all-failed stage fails
    errors = json.loads(lenient.stdout)["stages"][0]["errors"]
    assert 3 <= errors < 30
    strict = tokenbench(
        *args, "--db", str(tmp_path / "s.duckdb"), "--max-error-rate", "0.1", env=_env()
    )
    assert strict.code == 1
    assert "error rate above 10 %" in strict.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "give a scenario file, or --target URL and --model NAME"),
        (("--target", "http://127.0.0.1:9", "--model", "m", "--concurrency", "x"),
         "--concurrency: give comma-separated numbers"),
        (("--target", "http://127.0.0.1:9", "--model", "m", "--concurrency", "1",
          "--rate", "2"), "not both"),
        (("--target", "http://127.0.0.1:9", "--model", "m", "--concurrency", "1,0"),
         "load.concurrency.1"),
        (("--target", "http://127.0.0.1:9", "--model", "m", "--rate", "inf"),
         "load.rate.rps.0"),
        (("--target", "http://127.0.0.1:9", "--model", "m", "--prompt-tokens", "0"),
         "workload.mix.0.prompt_tokens.value"),
    ],
)  # fmt: skip
def test_bad_flags_exit_2_with_the_reason(
    tmp_path: Path, tokenbench: Callable[..., CliResult], args: tuple[str, ...], message: str
) -> None:
    result = tokenbench("run", *args, "--db", str(tmp_path / "x.duckdb"), env=_env())
    assert result.code == 2
    assert message in result.stderr
    assert not (tmp_path / "x.duckdb").exists()
