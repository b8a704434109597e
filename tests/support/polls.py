"""Polls on a condition, for tests that wait on real processes (never a fixed sleep)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx


def wait_until(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Return once ``predicate()`` holds; TimeoutError naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not ready after {timeout_s} s")
        time.sleep(0.05)


def wait_for_view(
    client: httpx.Client,
    run_id: str,
    until: Callable[[dict[str, Any]], bool],
    timeout_s: float = 120,
) -> dict[str, Any]:
    """Poll the run's view (GET /v1/runs/{id}) until ``until(view)``; TimeoutError with
    the last view after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    view: dict[str, Any] = {}
    while time.monotonic() < deadline:
        view = dict(client.get(f"/v1/runs/{run_id}").json())
        if until(view):
            return view
        time.sleep(0.2)
    raise TimeoutError(f"run {run_id} after {timeout_s} s: {view}")
