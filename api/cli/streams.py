"""The command line's two output streams (the report on stdout, progress and notes on
stderr) and the width tables are laid out for. Kept apart from api/cli/console.py (the
report's rendering, which imports the analytics stack) so that commands that only print
(``validate``, an error line) start without it."""

from __future__ import annotations

import os

from rich.console import Console

# Where output is not a terminal (CI logs, pipes) and COLUMNS does not say, tables are
# laid out for this width: wide enough that a report splits little, and nothing is cut
# at any width (analytics/render/fitted_tables.py).
PIPE_WIDTH = 200


def console_width(stderr: bool = False) -> int | None:
    """The width to lay tables out for: None (rich's own: the terminal's, or COLUMNS)
    on a terminal or when COLUMNS is set, else :data:`PIPE_WIDTH`."""
    if Console(stderr=stderr).is_terminal or os.environ.get("COLUMNS", "").isdigit():
        return None
    return PIPE_WIDTH


stdout = Console(width=console_width())
stderr = Console(stderr=True, width=console_width(stderr=True))
