"""What generated images cost and weigh (docs/workloads.md, "Images").

    python benchmarks/images.py [--repeat 3]

For each size and format: the encoded bytes (and their share of raw RGB), the time to
generate and encode one image on one thread, the time a pool of 8 takes with the
worker's threads (Pillow releases the GIL while it encodes), the time to build one chat
request body carrying the image (orjson of its data: URL, paid before ``sent``, so in
schedule lag, never in TTFT), and the simulator's time to read its size and count its
tokens (header only). Every figure is the median of ``--repeat`` runs, on this machine,
with its load printed first.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from scenarios.providers.simulate import SimulateSpec  # noqa: E402
from scenarios.workload.images import ImagesSpec  # noqa: E402
from workers.client.adapters.openai_chat import chat_body  # noqa: E402
from workers.prompts.images import build_pool, generate_image  # noqa: E402
from workers.prompts.plan import PlannedRequest  # noqa: E402
from workers.simulator.image_tokens import image_tokens  # noqa: E402

SIZES = [(256, 256), (512, 512), (1024, 1024), (1920, 1080)]
FORMATS = ["png", "jpeg", "webp"]
POOL = 8


def median_s(action: Callable[[], object], repeat: int) -> float:
    """Median wall time of ``action`` over ``repeat`` calls."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    console = Console(width=120)
    load = os.getloadavg()
    console.print(f"{os.cpu_count()} cores, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    table = Table("size", "format", "bytes", "of raw", "generate ms", f"pool of {POOL} ms",
                  "body ms", "simulator µs")  # fmt: skip
    for width, height in SIZES:
        for fmt in FORMATS:
            data = generate_image(width, height, fmt, 85, "bench/0")
            one = median_s(
                lambda: generate_image(width, height, fmt, 85, "bench/1"),  # noqa: B023
                args.repeat,
            )
            spec = ImagesSpec(width=width, height=height, format=fmt, distinct=POOL)
            pool_s = median_s(lambda: build_pool(spec, 1), 1)  # noqa: B023
            images = build_pool(spec, 1).for_request(0, 1)
            request = PlannedRequest(0, 100, 10, "a short question " * 30, images=images)
            body_s = median_s(lambda: chat_body("m", request), args.repeat * 10)  # noqa: B023
            messages = [{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": images.images[0].url}}]}]  # fmt: skip
            count_s = median_s(lambda: image_tokens(messages, SimulateSpec()), args.repeat * 10)  # noqa: B023
            table.add_row(
                f"{width}×{height}",
                fmt,
                f"{len(data):,}",
                f"{len(data) / (width * height * 3):.3f}",
                f"{one * 1e3:.1f}",
                f"{pool_s * 1e3:.0f}",
                f"{body_s * 1e3:.2f}",
                f"{count_s * 1e6:.0f}",
            )
    console.print(table)


if __name__ == "__main__":
    main()
