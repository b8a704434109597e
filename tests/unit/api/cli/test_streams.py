"""api/cli/streams.py: tables are laid out for PIPE_WIDTH when output is piped and
COLUMNS does not say, else for rich's own width (the terminal's, or COLUMNS)."""

from __future__ import annotations

import pytest

from api.cli.streams import PIPE_WIDTH, console_width


def test_piped_output_without_columns_gets_the_pipe_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    assert console_width() == PIPE_WIDTH  # pytest captures stdout: not a terminal
    assert console_width(stderr=True) == PIPE_WIDTH


def test_columns_leaves_the_width_to_rich(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "90")
    assert console_width() is None
    monkeypatch.setenv("COLUMNS", "wide")  # not a number: ignored
    assert console_width() == PIPE_WIDTH
