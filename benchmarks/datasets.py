"""Converting and counting dataset files (docs/workloads.md).

    python benchmarks/datasets.py [--rows 60000]

Generates a ShareGPT dump (JSON), the same rows as OpenAI chat JSONL and as Parquet,
converts each the way an upload is converted (a child process of bounded memory:
``analytics.datasets.process.convert_in_child``), then counts and filters the entries the
way a worker does (``workers.prompts.plan.dataset_rows``), with the 4-characters estimate and
with a tiny BPE tokenizer trained here. Prints one table: file size, conversion time
(child start included), rows, and counting time.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import orjson
import pyarrow as pa
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from analytics.datasets.process import convert_in_child  # noqa: E402
from scenarios.datasets.files import parse_entries  # noqa: E402
from scenarios.datasets.formats import Conversion  # noqa: E402
from scenarios.workload.spec import Workload  # noqa: E402
from tests.support.dataset_files import parquet_bytes, sharegpt_rows  # noqa: E402
from tests.support.tiny_tokenizer import train_bpe  # noqa: E402
from workers.prompts.exact import ExactPrompts  # noqa: E402
from workers.prompts.plan import WORDS, PromptMaker, WordPrompts, dataset_rows  # noqa: E402

MAX_BYTES = 256 * 1024 * 1024


def _files(rows: int) -> dict[str, tuple[bytes, Conversion]]:
    dump = sharegpt_rows(rows)
    chat = b"".join(
        orjson.dumps(
            {
                "messages": [
                    {"role": "user" if t["from"] == "human" else "assistant", "content": t["value"]}
                    for t in row["conversations"]
                ]
            }
        )
        + b"\n"
        for row in dump
    )
    table = pa.table({"conversations": [row["conversations"] for row in dump]})
    return {
        "ShareGPT JSON": (orjson.dumps(dump), Conversion()),
        "chat JSONL (mapped)": (chat, Conversion.of("jsonl", {"messages": "messages"})),
        "Parquet (ShareGPT turns)": (parquet_bytes(table), Conversion()),
    }


def main() -> None:
    """Run the measurements and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=60_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        from tokenizers import Tokenizer  # noqa: PLC0415

        tokenizer = Tokenizer.from_file(str(train_bpe(Path(tmp) / "tokenizer.json")))
        makers: dict[str, PromptMaker] = {
            "estimate": WordPrompts(),
            "tokenizer": ExactPrompts(tokenizer, tuple(WORDS)),
        }
        workload = Workload.model_validate(
            {"dataset": {"dataset": "ds-" + "0" * 64, "filters": {"max_prompt_tokens": 1000}}}
        )
        table = Table(title=f"datasets: {args.rows} rows, load {os.getloadavg()[0]:.1f}")
        for column in ("file", "MiB", "convert s", "rows", "count s (estimate)", "count s (BPE)"):
            table.add_column(column, justify="left" if column == "file" else "right")
        for name, (data, conversion) in _files(args.rows).items():
            started = time.perf_counter()
            converted = convert_in_child(data, conversion, 10_000_000, MAX_BYTES)
            convert_s = time.perf_counter() - started
            entries = parse_entries(converted.content, name, replay=False)
            counts = []
            for maker in makers.values():
                started = time.perf_counter()
                dataset_rows(workload, entries, maker)
                counts.append(f"{time.perf_counter() - started:.2f}")
            table.add_row(
                name, f"{len(data) / 2**20:.1f}", f"{convert_s:.2f}", str(converted.rows), *counts
            )
        Console().print(table)


if __name__ == "__main__":
    main()
