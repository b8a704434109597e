"""``tokenbench --help`` and a worker's start-up import none of the analytics stack:
DuckDB, plotly and ``analytics.*`` are imported only by the commands that use them
(api/cli/app.py registers commands lazily). Each check runs in a fresh interpreter,
since this test process has imported everything already."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("duckdb", "plotly", "analytics")

# Prints the top-level packages of HEAVY that the code before it imported.
_REPORT = (
    "import json, sys\n"
    f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))))\n"
)


def _heavy_after(code: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", code + "\n" + _REPORT],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    imported: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return imported


def test_the_help_imports_no_analytics() -> None:
    code = (
        "import sys\n"
        "sys.argv = ['tokenbench', '--help']\n"
        "from api.cli.app import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
    )
    assert _heavy_after(code) == []


@pytest.mark.parametrize("command", ["worker", "validate", "serve", "schema"])
def test_a_command_s_own_help_or_start_up_imports_no_analytics(command: str) -> None:
    """A worker, and the commands that read no results, load without the stack (``serve`` imports it when it starts serving)."""
    code = f"from api.cli.app import load_command\nload_command({command!r})\n"
    if command == "worker":
        code += "import workers.runtime.worker_main, workers.runtime.worker_processes\n"
    assert _heavy_after(code) == []


def test_a_command_that_reads_results_still_imports_them() -> None:
    """The check above can fail: loading ``report`` does import the analytics stack."""
    code = "from api.cli.app import load_command\nload_command('report')\n"
    assert set(_heavy_after(code)) >= {"duckdb", "analytics"}
