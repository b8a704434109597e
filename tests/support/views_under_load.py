"""A 10,000-shard run stored through REST, and /healthz probed while clients view it.

The run's regions have no worker: it is created waiting for one and cancelled at once,
so its 10,000 shards are stored without a request being sent. The probe counts the
/healthz answers given while views were in flight instead of timing anything: a
control plane that builds views on its event loop can answer /healthz only between
two views (about one answer per view), one that builds them off the loop answers it
all along.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx

from scenarios.limits import MAX_SHARDS_PER_RUN

# 25 providers × 100 levels × 4 regions = MAX_SHARDS_PER_RUN shards.
PROVIDERS, LEVELS, REGIONS = 25, 100, 4


def big_scenario(name: str = "big-run") -> dict[str, Any]:
    """10,000 one-request shards in regions of their own, which no worker serves."""
    tag = uuid.uuid4().hex[:8]
    return {
        "name": name,
        "providers": [
            {"name": f"p{i}", "kind": "simulated", "simulate": {"ttft_ms": 5, "itl_ms": 1}}
            for i in range(PROVIDERS)
        ],
        "workload": {
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": 4},
                    "output_tokens": {"dist": "fixed", "value": 2},
                }
            ]
        },
        "load": {"concurrency": list(range(1, LEVELS + 1)), "requests_per_level": 1},
        "regions": [f"nobody-{tag}-{i}" for i in range(REGIONS)],
    }


def stored_big_run(client: httpx.Client, timeout_s: float = 600) -> str:
    """Create the 10,000-shard run over REST, cancel it, and return its id once it is
    stored as ended."""
    created = client.post(
        "/v1/runs", json={"scenario": big_scenario(), "wait_for_workers": True}, timeout=timeout_s
    )
    assert created.status_code == 201, created.text
    assert created.json()["shards"] == MAX_SHARDS_PER_RUN
    run_id = str(created.json()["id"])
    cancelled = client.post(f"/v1/runs/{run_id}/cancel", timeout=timeout_s)
    assert cancelled.status_code == 202, cancelled.text
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        view = client.get(f"/v1/runs/{run_id}", timeout=timeout_s)
        if view.status_code == 200 and view.json()["state"] != "running":
            return run_id
        time.sleep(0.5)
    raise TimeoutError(f"run {run_id} still running after {timeout_s} s")


@dataclass
class Observation:
    """What the clients saw: each view's (status, sent, answered), each /healthz answer's
    (sent, answered), on this process's monotonic clock."""

    views: list[tuple[int, float, float]] = field(default_factory=list)
    views_by_client: list[tuple[int, int, float, float]] = field(default_factory=list)
    healthz: list[tuple[float, float]] = field(default_factory=list)
    retry_after: list[str] = field(default_factory=list)

    def healthz_before_any_view(self) -> int:
        """/healthz answers sent once every client's first view was sent and answered
        before any view was: while all of them were being worked on. A control plane
        that builds views on its event loop answers none then (or one that slipped in
        before the first view's work began)."""
        firsts: dict[int, tuple[float, float]] = {}
        for client, _, sent, done in self.views_by_client:
            if client not in firsts:
                firsts[client] = (sent, done)
        start = max(sent for sent, _ in firsts.values())
        end = min(done for _, done in firsts.values())
        return sum(1 for sent, done in self.healthz if start <= sent and done <= end)

    def healthz_during_views(self) -> int:
        """/healthz answers sent and answered while at least one view was in flight."""
        spans = sorted((sent, done) for _, sent, done in self.views)
        return sum(
            1 for sent, done in self.healthz if any(a <= sent and done <= b for a, b in spans)
        )


def view_while_probing(
    base: str, token: str, run_id: str, clients: int, views: int, timeout_s: float = 600
) -> Observation:
    """``clients`` threads GET the run's view ``views`` times each while one more thread
    sends /healthz, one after the other, until the last view is answered."""
    seen = Observation()
    lock = threading.Lock()
    stop = threading.Event()
    headers = {"authorization": f"Bearer {token}"}

    def probe() -> None:
        with httpx.Client(base_url=base, timeout=timeout_s) as client:
            while not stop.is_set():
                sent = time.monotonic()
                answer = client.get("/healthz")
                assert answer.status_code == 200, answer.text
                with lock:
                    seen.healthz.append((sent, time.monotonic()))

    # Every client sends its first view at the same moment: the window in which all of
    # them are being worked on is then a view's whole build, not what is left of it after
    # the threads happened to start one after another.
    start_together = threading.Barrier(clients)

    def view(index: int) -> None:
        with httpx.Client(base_url=base, headers=headers, timeout=timeout_s) as client:
            start_together.wait(timeout_s)
            for _ in range(views):
                sent = time.monotonic()
                answer = client.get(f"/v1/runs/{run_id}")
                done = time.monotonic()
                with lock:
                    seen.views.append((answer.status_code, sent, done))
                    seen.views_by_client.append((index, answer.status_code, sent, done))
                    if answer.status_code == 503:
                        seen.retry_after.append(answer.headers.get("retry-after", ""))

    prober = threading.Thread(target=probe)
    viewers = [threading.Thread(target=view, args=(i,)) for i in range(clients)]
    prober.start()
    try:
        for thread in viewers:
            thread.start()
        for thread in viewers:
            thread.join(timeout_s)
    finally:
        stop.set()
        prober.join(timeout_s)
    return seen
