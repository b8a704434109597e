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


# Built from parts so this file does not match its own check.
_OUTSIDE_CITATIONS = ("DOMAIN" + " §", "DOMAIN" + ".md", "../" + "shared")


def test_no_citations_outside_the_repository() -> None:
    """Every definition a comment or doc cites lives in docs/, not in a file outside the repo."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True, timeout=60
    )
    offenders = []
    for name in listed.stdout.decode().split("\0"):
        path = REPO / name
        if not name or not path.is_file():
            continue
        text = path.read_bytes().decode("utf-8", errors="replace")
        offenders += [f"{name}: {cite}" for cite in _OUTSIDE_CITATIONS if cite in text]
    assert not offenders, "\n".join(offenders)
