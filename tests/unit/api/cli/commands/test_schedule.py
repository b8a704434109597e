"""`tokenbench schedule` output: the list and a schedule's fires read at 80 columns, with
what a fire flagged and why one was skipped. (The commands against a real control plane:
tests/integration/api/test_schedules.py.)"""

from __future__ import annotations

from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from api.cli.commands.schedule import _print_list, _print_show, schedule_app

SCHEDULE: dict[str, Any] = {
    "id": "sch-0123456789ab", "name": "nightly", "scenario_id": "sc-0123456789ab",
    "cron": "0 3 * * *", "timezone": "Europe/Paris", "overrides": None,
    "wait_for_workers": False, "webhook_url": "https://hooks.example/tokenbench",
    "trend_window": 5, "min_change": 0.1, "state": "active",
    "created_at": "2025-01-01T00:00:00Z", "next_fire_at": "2025-01-02T02:00:00Z",
    "last_fire": {"outcome": "started", "run_id": "20250101-030000-abcdef"},
    "last_webhook": {
        "run_id": "20250101-030000-abcdef", "sent_at": "2025-01-01T03:05:00Z",
        "attempts": 1, "status": 200, "outcome": "delivered", "message": None,
    },
}  # fmt: skip
FIRES: list[dict[str, Any]] = [
    {
        "seq": 2, "scheduled_for": "2025-01-01T03:00:00Z", "kind": "scheduled",
        "outcome": "started", "run_id": "20250101-030000-abcdef", "run_state": "finished",
        "message": None,
        "regressions": [{"provider": "api", "region": "eu", "title": "TTFT p50"}],
    },
    {
        "seq": 1, "scheduled_for": "2024-12-31T03:00:00Z", "kind": "catch_up",
        "outcome": "skipped", "run_id": None, "run_state": None,
        "message": "run 20241230-030000-fedcba of this schedule is still running",
        "regressions": None,
    },
]  # fmt: skip


def test_the_list_and_a_schedule_read_at_80_columns(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    _print_list([SCHEDULE])
    _print_show(SCHEDULE, FIRES)
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "0 3 * * * (Europe/Paris)" in out and "started 20250101-030000-abcdef" in out
    assert "delivered for run 20250101-030000-abcdef (1 try, HTTP 200)" in out
    assert "api/eu TTFT p50" in out and "catch_up" in out and "still running" in out


def test_without_a_server_the_commands_exit_1() -> None:
    app = typer.Typer()
    app.add_typer(schedule_app, name="schedule")
    result = CliRunner().invoke(app, ["schedule", "list", "--server", "http://127.0.0.1:1"])
    assert result.exit_code == 1 and "cannot reach" in result.output
