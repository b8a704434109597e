"""api/cli/app.py: every command is registered under its documented name, and an
unexpected error is one line and exit 1, not a traceback (unless TOKENBENCH_DEBUG)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from api.cli import app as cli_app

COMMANDS = {
    "run", "demo", "serve", "submit", "validate", "schema", "worker", "plan", "report",
    "sql", "export", "import", "trend", "spend", "gateway", "simulate", "whoami", "audit",
}  # fmt: skip
GROUPS = {"shadow", "providers", "schedule", "tokens", "teams"}


def test_every_command_is_listed_with_its_summary() -> None:
    assert set(cli_app.COMMANDS) == COMMANDS | GROUPS
    shown = CliRunner().invoke(cli_app.app, ["--help"], env={"COLUMNS": "250"})
    assert shown.exit_code == 0
    for name in cli_app.COMMANDS:
        command = cli_app.load_command(name)
        assert command.name == name and command.help, name
        summary = " ".join(command.help.split("\n\n")[0].split())
        # The listing reads the help from the source: the same words the command has.
        assert " ".join(cli_app.short_help(*cli_app.COMMANDS[name]).split()) == summary, name
        assert f"{name} " in shown.output and summary.split(". ")[0] in shown.output, name


def test_a_lazy_command_runs_and_shows_its_own_help() -> None:
    shown = CliRunner().invoke(cli_app.app, ["schema", "--help"])
    assert shown.exit_code == 0 and "Print the scenario JSON Schema" in shown.output
    printed = CliRunner().invoke(cli_app.app, ["schema"])
    assert printed.exit_code == 0 and '"properties"' in printed.output
    unknown = CliRunner().invoke(cli_app.app, ["no-such-command"])
    assert unknown.exit_code == 2 and "No such command" in unknown.output


def test_without_arguments_the_help_is_shown() -> None:
    shown = CliRunner().invoke(cli_app.app, [])
    assert "Usage: tokenbench" in shown.output
    assert shown.exit_code == 2  # usage, not success


def _broken() -> None:
    raise RuntimeError("disk on fire")


def test_an_unexpected_error_is_one_line_and_exit_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("TOKENBENCH_DEBUG", raising=False)
    monkeypatch.setattr(cli_app, "app", _broken)
    with pytest.raises(SystemExit) as exited:
        cli_app.main()
    assert exited.value.code == 1
    err = capsys.readouterr().err
    assert "error: RuntimeError: disk on fire" in err
    assert "TOKENBENCH_DEBUG=1" in err and "Traceback" not in err


def test_tokenbench_debug_shows_the_error_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKENBENCH_DEBUG", "1")
    monkeypatch.setattr(cli_app, "app", _broken)
    with pytest.raises(RuntimeError, match="disk on fire"):
        cli_app.main()
