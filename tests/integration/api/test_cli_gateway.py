"""api/cli/commands/gateway.py: ``shadow compare`` and ``shadow export-replay`` read a session
from the control plane (``--server``) or a DuckDB file (``--db``); ``gateway`` refuses
to start without what it needs (exit 2). Serving and SIGTERM: tests/faults/test_signals.py."""

from __future__ import annotations

import datetime as dt
import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import typer
import yaml
from typer.testing import CliRunner

from analytics.shadow.capture import ensure_shadow_schema, ingest_captures
from analytics.store.db import connect
from analytics.store.runs import RunStore
from api.cli.commands.gateway import gateway, shadow_app
from api.control.session_coordinator import SessionCoordinator
from scenarios.datasets.files import inspect_dataset
from scenarios.gateway_config import parse_gateway_config
from scenarios.settings import get_settings
from tests.conftest import API_TOKEN
from tests.integration.api.conftest import RestStack, gateway_config, lonely_region

pytestmark = pytest.mark.integration

app = typer.Typer()
app.command()(gateway)
app.add_typer(shadow_app, name="shadow")
runner = CliRunner()
NO_ENV = {"TOKENBENCH_SERVER": None, "TOKENBENCH_TOKEN": None}


@pytest.fixture
def session(rest_stack: RestStack) -> Iterator[str]:
    """A shadow session opened on the served control plane, stopped afterwards."""
    opened = rest_stack.client.post(
        "/v1/shadow-sessions",
        json={"config": gateway_config(lonely_region()), "wait_for_workers": True},
    )
    assert opened.status_code == 201, opened.text
    yield opened.json()["id"]
    rest_stack.client.post(f"/v1/shadow-sessions/{opened.json()['id']}/stop", params={"drain_s": 0})


def test_a_session_read_from_the_control_plane(
    rest_stack: RestStack, session: str, tmp_path: Path
) -> None:
    server = ["--server", rest_stack.base, "--token", API_TOKEN]
    compared = runner.invoke(
        app, ["shadow", "compare", session, *server, "--format", "json"], env=NO_ENV
    )
    assert compared.exit_code == 0, compared.output
    assert json.loads(compared.stdout) == []  # nothing mirrored yet
    table = runner.invoke(app, ["shadow", "compare", session, *server], env=NO_ENV)
    assert table.exit_code == 0 and f"shadow session {session}" in table.stdout

    out = tmp_path / "replay.jsonl"
    exported = runner.invoke(
        app, ["shadow", "export-replay", session, "-o", str(out), *server], env=NO_ENV
    )
    assert exported.exit_code == 2  # nothing to export is the user's to fix (store_text)
    assert "privacy.store_text: true" in exported.stderr
    assert not out.exists()

    unknown = runner.invoke(app, ["shadow", "compare", "no-such-session", *server], env=NO_ENV)
    assert unknown.exit_code == 2
    assert "HTTP 404" in unknown.stderr


def _capture(run_id: str, seq: int, text: str | None, max_tokens: int | None) -> dict[str, Any]:
    messages = None if text is None else orjson.dumps([{"role": "user", "content": text}]).decode()
    return {
        "run_id": run_id, "request_key": f"k{seq}", "seq": seq, "gateway": "gw-1",
        "received_at": dt.datetime(2025, 1, 1, 12, 0, seq, tzinfo=dt.UTC), "stream": True,
        "sampled": True, "enqueued": True, "prompt_chars": len(text or "x"),
        "prompt_sha256": "0" * 64, "max_tokens": max_tokens, "messages": messages,
    }  # fmt: skip


def test_a_session_read_from_a_database_file_exports_a_replay_log(tmp_path: Path) -> None:
    db = tmp_path / "results.duckdb"
    con = connect(db)
    ensure_shadow_schema(con)
    config = parse_gateway_config(gateway_config("eu"), "config")
    SessionCoordinator.open("sess-db", config, RunStore(con))
    # Two requests captured with their text, one without (privacy.store_text off).
    ingest_captures(
        con,
        [
            _capture("sess-db", 1, "hello", 16),
            _capture("sess-db", 2, None, 8),
            _capture("sess-db", 3, "again", None),
        ],
    )
    con.close()

    compared = runner.invoke(
        app, ["shadow", "compare", "sess-db", "--db", str(db), "--format", "json"], env=NO_ENV
    )
    assert compared.exit_code == 0, compared.output
    assert json.loads(compared.stdout) == []

    out = tmp_path / "replay.jsonl"
    exported = runner.invoke(
        app, ["shadow", "export-replay", "sess-db", "-o", str(out), "--db", str(db)], env=NO_ENV
    )
    assert exported.exit_code == 0, exported.output
    assert f"2 requests written to {out}" in exported.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["messages"][0]["content"] for line in lines] == ["hello", "again"]
    assert lines[0]["max_tokens"] == 16 and lines[1]["max_tokens"] > 0  # a default bound
    assert lines[1]["timestamp"] - lines[0]["timestamp"] == 2.0
    # What it writes is what `workload.replay` reads.
    assert "replay" in inspect_dataset(out.read_bytes(), max_lines=100).kinds

    for command in (["compare", "nope"], ["export-replay", "nope", "-o", str(out)]):
        missing = runner.invoke(app, ["shadow", *command, "--db", str(db)], env=NO_ENV)
        assert missing.exit_code == 2
        assert "no shadow session 'nope'" in missing.stderr


@pytest.fixture
def own_signal_handlers() -> Iterator[None]:
    """``gateway`` makes SIGTERM an interrupt first thing: give this process its own back."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


@pytest.fixture
def no_redis(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("TOKENBENCH__REDIS__URL", raising=False)
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


@pytest.mark.usefixtures("own_signal_handlers", "no_redis")
def test_the_gateway_refuses_to_start_without_what_it_needs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump(gateway_config("eu") | {"sample_rate": 2}))
    invalid = runner.invoke(app, ["gateway", "--config", str(config)], env=NO_ENV)
    assert invalid.exit_code == 2
    assert invalid.stderr.startswith("invalid gateway config") and "sample_rate" in invalid.stderr

    config.write_text(yaml.safe_dump(gateway_config("eu")))
    no_broker = runner.invoke(app, ["gateway", "--config", str(config)], env=NO_ENV)
    assert no_broker.exit_code == 2
    assert "needs TOKENBENCH__REDIS__URL" in no_broker.stderr

    monkeypatch.setenv("TOKENBENCH__REDIS__URL", "redis://127.0.0.1:1/0")
    get_settings.cache_clear()
    no_server = runner.invoke(app, ["gateway", "--config", str(config)], env=NO_ENV)
    assert no_server.exit_code == 2
    assert "give --server" in no_server.stderr
