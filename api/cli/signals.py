"""SIGTERM as Ctrl-C for the long-running commands (docs/security.md, signals).

uvicorn handles SIGINT and SIGTERM itself (a graceful shutdown: the application's
lifespan ends, so buffered rows are flushed and connections closed) and then raises the
signal again with the handler it found. For SIGTERM that was the default action, which
killed the process on the spot: ``tokenbench serve`` left its embedded Redis running and
``tokenbench gateway`` never stopped its shadow session. With :func:`sigterm_as_interrupt`
installed first, that second SIGTERM is a KeyboardInterrupt, which uvicorn swallows, so
the command's own cleanup runs and it exits 0, exactly as after Ctrl-C.
"""

from __future__ import annotations

import signal


def sigterm_as_interrupt() -> None:
    """Make SIGTERM raise KeyboardInterrupt, as SIGINT does (also when SIGINT was
    inherited as ignored, e.g. from a shell's background job)."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda *_: signal.raise_signal(signal.SIGINT))
