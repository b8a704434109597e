"""The gateway's hand-off of samples: never blocks the request path, counts what it drops."""

from __future__ import annotations

from celery import Celery

from workers.gateway.sender import ShadowSender


def test_a_full_queue_drops_the_sample_and_counts_it() -> None:
    # Not started: nothing drains the queue, and nothing connects to the broker.
    sender = ShadowSender(
        celery=Celery("t", set_as_current=False),
        broker_url="redis://127.0.0.1:9/0",
        regions=["eu"],
        max_pending=2,
        max_backlog=10,
        ttl_s=30,
    )
    assert [sender.offer({"seq": i}) for i in range(5)] == [True, True, False, False, False]
    assert sender.pending == 2
    assert (sender.stats.offered, sender.stats.dropped_full, sender.stats.sent) == (5, 3, 0)
