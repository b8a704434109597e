"""Token truth through a real `tokenbench run` (embedded Redis, real worker processes,
DuckDB): answers without a finish reason are incomplete errors, servers that stream no
usage get no invented prompt count (or the workload tokenizer's, marked so), and the
completions and llama.cpp dialects send the output-length knobs; against the simulator
and the fake servers replaying recorded wire bytes."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pytest
import yaml

from tests.conftest import CliResult
from tests.fakes.provider_server import KEY, FakeProviders
from tests.support.tiny_tokenizer import train_bpe

pytestmark = pytest.mark.integration

FAST = {"ttft_ms": 2, "itl_ms": 1}
REQUESTS = 20
UNFINISHED_SEED = 11


def _workload(**extra: Any) -> dict[str, Any]:
    return {
        "mix": [
            {
                "prompt_tokens": {"dist": "fixed", "value": 12},
                "output_tokens": {"dist": "fixed", "value": 8},
            }
        ],
        **extra,
    }


def _run(
    tmp_path: Path,
    tokenbench: Callable[..., CliResult],
    scenario: dict[str, Any],
    env: dict[str, str] | None = None,
    code: int = 0,
) -> tuple[dict[str, Any], duckdb.DuckDBPyConnection, Path]:
    path = tmp_path / f"{scenario['name']}.yaml"
    path.write_text(yaml.safe_dump(scenario))
    db = tmp_path / f"{scenario['name']}.duckdb"
    base = {k: v for k, v in os.environ.items() if not k.startswith("TOKENBENCH__")}
    base["HF_HUB_OFFLINE"] = "1"  # never the network
    result = tokenbench(
        "run", str(path), "--db", str(db), "--format", "json", env=base | (env or {})
    )
    assert result.code == code, result.stderr
    if code:  # exit 1: a stage of which every request failed, named
        assert "every request failed" in result.stderr
    report = json.loads(result.stdout[result.stdout.index("{") :])
    assert report["state"] == "finished", report
    return report, duckdb.connect(str(db), read_only=True), db


def _stages(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["provider"]: row for row in report["stages"]}


def test_no_usage_and_no_finish_reason_against_the_simulator(
    tmp_path: Path, tokenbench: Callable[..., CliResult]
) -> None:
    scenario = {
        "name": "truth-sim",
        "providers": [
            {"name": "sim-usage", "kind": "simulated", "simulate": FAST},
            {
                "name": "sim-nousage",
                "kind": "simulated",
                "simulate": {**FAST, "stream_usage": False},
            },
            {
                "name": "sim-unfinished",
                "kind": "simulated",
                "simulate": {**FAST, "unfinished_rate": 0.5, "seed": UNFINISHED_SEED},
            },
        ],
        "workload": _workload(),
        "load": {"concurrency": [2], "requests_per_level": REQUESTS},
    }
    report, con, db = _run(tmp_path, tokenbench, scenario)
    rows = con.execute(
        "SELECT provider, status, error_class, prompt_tokens, prompt_count_source, "
        "completion_tokens, token_count_source, finish_reason FROM requests"
    ).fetchall()
    by = {name: [r[1:] for r in rows if r[0] == name] for name in ("sim-usage", "sim-nousage")}
    # The server's counts (the simulator counts 12 words), and why each answer ended.
    assert set(by["sim-usage"]) == {("ok", None, 12, "usage", 8, "usage", "length")}
    # No usage: the prompt count is unknown, not the planned 12; completions are events.
    assert set(by["sim-nousage"]) == {("ok", None, None, None, 8, "events", "length")}

    # About half the answers end unfinished (seeded draws: 7 of 20 with this seed, unless
    # a shard ever ran twice); each is an incomplete error, every other answer finished.
    outcome = [r[1:3] + r[7:] for r in rows if r[0] == "sim-unfinished"]
    unfinished = outcome.count(("error", "incomplete", None))
    assert 0 < unfinished < REQUESTS
    assert outcome.count(("ok", None, "length")) == REQUESTS - unfinished

    stages = _stages(report)
    nousage, cut = stages["sim-nousage"], stages["sim-unfinished"]
    assert nousage["prompt_tokens_unknown"] == REQUESTS
    assert nousage["input_tokens"] is None and nousage["input_tok_s"] is None
    assert nousage["output_tok_s"] > 0 and nousage["prompt_length_error_pct"] is None
    assert stages["sim-usage"]["input_tokens"] == 12 * REQUESTS
    assert stages["sim-usage"]["finish_reasons"] == f"length={REQUESTS}"
    # Incomplete answers are errors: counted in the error rate, listed with their message.
    assert (cut["errors"], cut["errors_by_class"]) == (unfinished, f"incomplete={unfinished}")
    (top,) = [e for e in report["errors"] if e["provider"] == "sim-unfinished"]
    assert top["error_class"] == "incomplete" and top["count"] == unfinished
    assert top["message"] == "stream ended with [DONE] but no finish_reason after 4 token events"

    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENBENCH__")}
    table = tokenbench("report", "--db", str(db), env=env)
    assert table.code == 0, table.stderr
    assert "Prompt tokens unknown" in table.stdout
    assert "the server sent no usage" in " ".join(table.stdout.split())  # its note
    # provider, stage, region, unknown, answers
    rows = [line.split() for line in table.stdout.splitlines()]
    assert ["sim-nousage", "0", "local", str(REQUESTS), str(REQUESTS)] in rows


def test_the_workload_tokenizer_counts_prompts_a_server_did_not_report(
    tmp_path: Path, tokenbench: Callable[..., CliResult]
) -> None:
    train_bpe(tmp_path / "tokenizer.json")
    scenario = {
        "name": "truth-tokenizer",
        "providers": [
            {
                "name": "sim-nousage",
                "kind": "simulated",
                "simulate": {**FAST, "stream_usage": False},
            }
        ],
        "workload": _workload(tokenizer={"path": str(tmp_path)}),
        "load": {"concurrency": [2], "requests_per_level": REQUESTS},
    }
    report, con, _ = _run(tmp_path, tokenbench, scenario)
    counted = con.execute(
        "SELECT count(*), count(*) FILTER (prompt_tokens = planned_prompt_tokens), "
        "min(prompt_count_source), max(prompt_count_source), min(planned_prompt_source) "
        "FROM requests WHERE status = 'ok'"
    ).fetchone()
    assert counted == (REQUESTS, REQUESTS, "tokenizer", "tokenizer", "tokenizer")
    (stage,) = report["stages"]
    assert stage["prompt_tokens_counted"] == REQUESTS and stage["prompt_tokens_unknown"] == 0
    # Counted, so throughput has its input side; but it is no server report.
    assert stage["input_tokens"] == 12 * REQUESTS and stage["input_tok_s"] > 0
    assert stage["prompt_length_error_pct"] is None


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProviders]:
    server = FakeProviders().start()
    yield server
    server.stop()


def test_dialects_through_a_run_against_recorded_wire_bytes(
    tmp_path: Path, fake: FakeProviders, tokenbench: Callable[..., CliResult]
) -> None:
    knobs = {"enforce_output_length": True, "extra_body": {"top_k": 1}}
    key = {"api_key_env": "FAKE_KEY"}
    scenario = {
        "name": "truth-dialects",
        "providers": [
            {
                "name": "completions",
                "kind": "openai-completions",
                "base_url": fake.url("ok", "/v1"),
                "model": "m",
                **key,
                **knobs,
            },
            {"name": "llama", "kind": "llamacpp", "base_url": fake.url("ok"), **knobs},
            {"name": "tgi", "kind": "tgi", "base_url": fake.url("ok")},
            {
                "name": "replicate",
                "kind": "replicate",
                "base_url": fake.url("ok", "/v1"),
                "model": "meta/meta-llama-3-8b-instruct",
                **key,
            },
            {
                "name": "llama-cpp-python",
                "kind": "openai",
                "base_url": fake.url("nousage", "/v1"),
                "model": "m",
                **key,
            },
            {
                "name": "no-finish",
                "kind": "openai",
                "base_url": fake.url("nofinish", "/v1"),
                "model": "m",
                **key,
            },
        ],
        "workload": _workload(),
        "load": {"concurrency": [2], "requests_per_level": 4},
    }
    env = {
        "FAKE_KEY": KEY,
        # The fake lives on loopback: the key may be sent there, nowhere else.
        "TOKENBENCH__WORKER__SECRET_HOSTS": '{"FAKE_KEY": ["http://127.0.0.1:*"]}',
        "TOKENBENCH__EGRESS__ALLOW_LOOPBACK": "true",
    }
    before = len(fake.requests)
    # Every answer of `no-finish` is incomplete: the run says so and exits 1.
    report, con, _ = _run(tmp_path, tokenbench, scenario, env, code=1)
    rows = con.execute(
        "SELECT provider, status, error_class, finish_reason, prompt_tokens, prompt_count_source "
        "FROM requests"
    ).fetchall()
    outcome = {provider: {r[1:] for r in rows if r[0] == provider} for provider in _stages(report)}
    assert outcome == {
        "completions": {("ok", None, "length", 5, "usage")},
        "llama": {("ok", None, "length", 6, "usage")},  # stop_type limit
        "tgi": {("ok", None, "stop", 7, "usage")},  # eos_token
        "replicate": {("ok", None, None, 7, "usage")},  # Replicate never says why: ok
        "llama-cpp-python": {("ok", None, "stop", None, None)},  # no usage: unknown
        "no-finish": {("error", "incomplete", None, None, None)},  # [DONE], no reason
    }
    bodies = [orjson.loads(r["body"]) for r in fake.requests[before:] if r["body"]]
    completions = [b for b in bodies if "max_tokens" in b and "messages" not in b]
    llama = [b for b in bodies if "n_predict" in b]
    assert len(completions) == len(llama) == 4
    for body in completions:
        assert (body["ignore_eos"], body["min_tokens"], body["top_k"]) == (True, 8, 1)
    for body in llama:
        assert (body["ignore_eos"], body["n_predict"], body["top_k"]) == (True, 8, 1)
    chats = [b for b in bodies if "messages" in b]
    assert chats and all("ignore_eos" not in b for b in chats)  # only where it was asked
