"""Static checks run with the suite: ruff, mypy (strict on source) and the layering contracts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


@pytest.mark.parametrize(
    "command",
    [
        [str(BIN / "ruff"), "check", "."],
        [str(BIN / "ruff"), "format", "--check", "."],
        [sys.executable, "-m", "mypy"],
        [str(BIN / "lint-imports")],
    ],
    ids=["ruff", "ruff-format", "mypy", "import-layers"],
)
def test_static_check_passes(command: list[str]) -> None:
    done = subprocess.run(
        command, cwd=REPO, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
