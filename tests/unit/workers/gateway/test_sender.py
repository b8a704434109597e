"""The gateway's hand-off of samples: never blocks the request path, counts what it drops,
and counts a region's backlog in samples although its queue holds batches."""

from __future__ import annotations

from collections import deque

from celery import Celery

from workers.gateway.sender import ShadowSender, waiting_samples


def test_a_full_queue_drops_the_sample_and_counts_it() -> None:
    # Not started: nothing drains the queue, and nothing connects to the broker.
    sender = ShadowSender(
        celery=Celery("t", set_as_current=False),
        broker_url="redis://127.0.0.1:9/0",
        run_id="sess",
        providers=[{"name": "cand", "kind": "simulated"}],
        regions=["eu"],
        max_pending=2,
        max_backlog=10,
        ttl_s=30,
    )
    assert [sender.offer({"seq": i}, 10, i) for i in range(5)] == [True, True, False, False, False]
    assert sender.pending == 2
    assert (sender.stats.offered, sender.stats.dropped_full, sender.stats.sent) == (5, 3, 0)
    sender.stop(timeout_s=0)  # never started: what waits is counted as dropped at stop
    assert sender.stats.dropped_at_stop == 2


def test_waiting_samples_are_the_newest_batches_still_queued() -> None:
    sizes = deque([1, 5, 2, 8])  # this gateway's messages to a region, newest last
    assert waiting_samples(0, sizes) == 0
    assert waiting_samples(1, sizes) == 8  # workers took the oldest three
    assert waiting_samples(2, sizes) == 10
    assert waiting_samples(4, sizes) == 16
    # Two more messages than remembered (another gateway's): the mean size each.
    assert waiting_samples(6, sizes) == 16 + 8
    assert waiting_samples(3, deque()) == 3  # nothing known: a sample each, at least
