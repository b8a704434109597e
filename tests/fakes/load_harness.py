"""Running load shapes in-process against a loopback endpoint, for load and accuracy tests.

The endpoint is a separate process (``tests.fakes.sse_server`` or ``tokenbench
simulate``), so its timers never share this process's GIL; the client is the real one
(``make_client`` and the OpenAI chat adapter) on a uvloop loop, as in a worker.
"""

from __future__ import annotations

import asyncio
import math
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from scenarios.providers.kinds import OpenAIProvider
from tests.fakes.sse_server import READY_PREFIX
from workers.client.adapters import openai_chat
from workers.client.adapters.post_stream import PostStreamAdapter
from workers.client.http import make_client
from workers.client.result import RequestResult
from workers.client.streaming import Limits, json_headers
from workers.load.shapes import LoadShape, rate_figures
from workers.prompts.plan import PlannedRequest
from workers.runtime.event_loop import new_loop
from workers.shard.health import ShardHealth

REPO = Path(__file__).resolve().parents[2]


@contextmanager
def sse_server(*args: str) -> Iterator[str]:
    """Start ``tests.fakes.sse_server ARGS`` on a free port; yield its ``/v1`` URL."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.sse_server", "--port", "0", *args],
        stdout=subprocess.PIPE,
        cwd=REPO,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().decode().strip()
        assert line.startswith(READY_PREFIX), line
        yield f"http://127.0.0.1:{int(line.removeprefix(READY_PREFIX))}/v1"
    finally:
        process.terminate()
        process.wait(10)
        if process.stdout is not None:
            process.stdout.close()


def chat_adapter(base_url: str) -> PostStreamAdapter:
    """The real OpenAI chat adapter for ``base_url``."""
    provider = OpenAIProvider(name="fake", kind="openai", base_url=base_url, model="fake")
    return openai_chat.chat_adapter(
        url=base_url + "/chat/completions",
        model="fake",
        headers=json_headers(None),
        limits=Limits.of(provider),
        retry=None,
    )


Outcome = tuple[list[tuple[PlannedRequest, RequestResult]], dict[str, str | int | float]]


def run_load(load: LoadShape, base_url: str, target_rps: float | None = None) -> Outcome:
    """Run ``load`` against ``base_url`` on a fresh uvloop; results and health fields."""

    async def main() -> Outcome:
        adapter = chat_adapter(base_url)
        results: list[tuple[PlannedRequest, RequestResult]] = []
        health = ShardHealth()
        async with make_client() as http:

            async def send(request: PlannedRequest, intended: int) -> RequestResult:
                return await adapter.measure(http, request, intended)

            def record(request: PlannedRequest, result: RequestResult) -> None:
                health.add(result)
                results.append((request, result))

            async with health:
                await load.run(send, record)
        return results, health.summary(**rate_figures(load, target_rps))

    with asyncio.Runner(loop_factory=new_loop) as runner:
        return runner.run(main())


def ks_exponential(gaps_s: np.ndarray, rate: float) -> tuple[float, float]:
    """Kolmogorov-Smirnov statistic of ``gaps_s`` against Exp(rate), and its asymptotic
    p-value (Kolmogorov distribution; fine for n in the hundreds)."""
    x = np.sort(gaps_s)
    n = len(x)
    cdf = 1.0 - np.exp(-rate * x)
    ranks = np.arange(1, n + 1)
    d = float(max(np.max(ranks / n - cdf), np.max(cdf - (ranks - 1) / n)))
    lam = (math.sqrt(n) + 0.12 + 0.11 / math.sqrt(n)) * d
    p = 2.0 * sum((-1) ** (k - 1) * math.exp(-2.0 * k * k * lam * lam) for k in range(1, 101))
    return d, min(max(p, 0.0), 1.0)
