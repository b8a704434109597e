"""The control loop's pacing after unexpected errors: it backs off while steps keep
failing, never past its maximum (the loop itself: tests/faults/test_step_errors.py)."""

from __future__ import annotations

from api.control.plane import (
    MAX_STEP_ERROR_BACKOFF_S,
    STEP_ERROR_BACKOFF_S,
    new_run_id,
    step_error_backoff,
)


def test_the_back_off_doubles_while_steps_keep_failing_up_to_its_maximum() -> None:
    waits = [step_error_backoff(n) for n in range(1, 40)]
    assert waits[0] == STEP_ERROR_BACKOFF_S > 0
    assert waits[1] == 2 * STEP_ERROR_BACKOFF_S
    assert waits == sorted(waits)
    assert max(waits) == waits[-1] == MAX_STEP_ERROR_BACKOFF_S


def test_run_ids_are_unique_and_sort_by_creation() -> None:
    ids = [new_run_id() for _ in range(100)]
    assert len(set(ids)) == 100
    assert all(len(i.split("-")) == 3 for i in ids)
