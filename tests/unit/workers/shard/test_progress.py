"""workers/shard/progress.py: a shard's live median TTFT is over all its successful requests
(not a recent window), within RELATIVE_ERROR of the exact median the report computes."""

from __future__ import annotations

import numpy as np
import pytest

from workers.client.errors import ErrorClass
from workers.client.result import RequestFailure, RequestResult
from workers.shard.progress import RELATIVE_ERROR, Progress

MS = 1_000_000


def _ok(ttft_ms: float) -> RequestResult:
    return RequestResult(intended_start=0, sent=10 * MS, first_token=10 * MS + round(ttft_ms * MS))


def _failed() -> RequestResult:
    return RequestResult(intended_start=0, sent=0, failure=RequestFailure(ErrorClass.CONNECT, "x"))


@pytest.mark.parametrize("n", [1, 2, 3, 10, 999, 20_000])
def test_the_median_is_within_its_bound_of_the_exact_one(n: int) -> None:
    rng = np.random.default_rng(n)
    ttfts = rng.lognormal(np.log(150), 0.8, size=n)
    progress = Progress()
    for value in ttfts:
        progress.add(_ok(float(value)))
    exact = float(np.quantile(np.round(ttfts * MS) / MS, 0.5))  # as quantile_cont
    assert progress.ttft_p50() == pytest.approx(exact, rel=RELATIVE_ERROR + 1e-9)


def test_the_figure_covers_the_whole_shard_not_the_last_second() -> None:
    progress = Progress()
    for _ in range(100):
        progress.add(_ok(100.0))
    first = progress.ttft_p50()
    for _ in range(10):  # a slow tail after the first report
        progress.add(_ok(900.0))
    assert first == pytest.approx(100.0, rel=RELATIVE_ERROR)
    # Read twice in a row it does not change: nothing is reset by reading.
    assert progress.ttft_p50() == progress.ttft_p50() == pytest.approx(100.0, rel=RELATIVE_ERROR)


def test_errors_are_counted_and_left_out_of_the_median() -> None:
    progress = Progress()
    assert progress.ttft_p50() == -1.0  # nothing yet
    for _ in range(3):
        progress.add(_failed())
    assert (progress.done, progress.errors, progress.ttft_p50()) == (3, 3, -1.0)
    progress.add(_ok(42.0))
    assert (progress.done, progress.errors) == (4, 3)
    assert progress.ttft_p50() == pytest.approx(42.0, rel=RELATIVE_ERROR)
