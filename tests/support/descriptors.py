"""A process's open sockets, read from its /proc fd table (tests of what a run releases)."""

from __future__ import annotations

import os
import time


def sockets_of(pid: int) -> int:
    """Sockets the process ``pid`` holds now."""
    count = 0
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            count += os.readlink(f"/proc/{pid}/fd/{name}").startswith("socket:")
        except OSError:
            continue  # closed meanwhile
    return count


def settle(pid: int, at_most: int, timeout_s: float = 90) -> int:
    """The process's socket count once it is at most ``at_most`` (polled every half
    second), else the last count seen after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    count = sockets_of(pid)
    while count > at_most and time.monotonic() < deadline:
        time.sleep(0.5)
        count = sockets_of(pid)
    return count
