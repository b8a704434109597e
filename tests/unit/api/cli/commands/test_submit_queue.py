"""api/cli/commands/submit.py: what `submit --wait` says while its run is queued."""

from __future__ import annotations

from api.cli.commands.submit import queued_line
from api.schemas import QueuePublic, RunPublic


def _view(state: str, queue: QueuePublic | None = None) -> RunPublic:
    return RunPublic(
        id="r2",
        name="n",
        state=state,  # type: ignore[arg-type]
        requests_done=0,
        requests_planned=None,
        errors=0,
        ttft_p50_ms=None,
        stages=[],
        queue=queue,
    )


def test_a_queued_run_says_its_place_and_what_it_waits_for() -> None:
    queue = QueuePublic(position=1, waiting_for=["r1"], reason="its target is in use", targets=[])
    assert queued_line(_view("queued", queue)) == (
        "run r2 queued: position 1, waiting for r1 (its target is in use)"
    )
    assert queued_line(_view("running")) == ""
