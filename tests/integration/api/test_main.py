"""api/__main__.py: ``python -m api`` is the ``tokenbench`` command line, the same entry
point as the installed script, with the same exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from collections.abc import Callable

import pytest

import api.__main__ as entry
from api.cli import app
from tests.conftest import REPO, CliResult

pytestmark = pytest.mark.integration


def test_one_entry_point_for_the_module_and_the_script() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    module, _, function = project["scripts"]["tokenbench"].partition(":")
    assert (module, function) == (app.__name__, entry.main.__name__)
    assert entry.main is app.main


def test_python_m_api_runs_the_command_line(tokenbench: Callable[..., CliResult]) -> None:
    shown = tokenbench("--help", timeout=120)
    assert shown.code == 0
    assert "Usage: python -m api" in shown.stdout
    for command in ("run", "serve", "submit", "validate", "worker", "gateway", "shadow"):
        assert f" {command} " in shown.stdout, command
    schema = tokenbench("schema", timeout=120)
    assert schema.code == 0 and "providers" in json.loads(schema.stdout)["properties"]


def test_the_installed_script_answers_the_same(tokenbench: Callable[..., CliResult]) -> None:
    script = subprocess.run(
        [str(os.path.join(os.path.dirname(sys.executable), "tokenbench")), "schema"],
        capture_output=True, text=True, cwd=REPO, timeout=120, check=False,
    )  # fmt: skip
    assert script.returncode == 0
    assert script.stdout == tokenbench("schema", timeout=120).stdout


def test_an_unknown_command_is_a_usage_error(tokenbench: Callable[..., CliResult]) -> None:
    shown = tokenbench("no-such-command", timeout=120)
    assert shown.code == 2
    assert "No such command 'no-such-command'" in shown.stderr
