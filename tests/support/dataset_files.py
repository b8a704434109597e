"""Dataset files generated at test time: ShareGPT JSON, OpenAI chat JSONL, Parquet, and a
Hugging Face hub cache laid out on disk (no download). Rows have lengths that differ
row by row, seeded, so a record's planned lengths identify the row it came from."""

from __future__ import annotations

import io
import random
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

WORD = "ab "  # 3 characters: lengths in characters are easy to reason about


def text(chars: int, tag: str) -> str:
    """A text of exactly ``chars`` characters that starts with ``tag``."""
    return (f"{tag} " + WORD * chars)[:chars]


def sharegpt_rows(count: int, seed: int = 1) -> list[dict[str, Any]]:
    """ShareGPT conversations: human/gpt turns (two exchanges), prompt and answer lengths
    drawn per row; the first answer's length is the row's output length."""
    rng = random.Random(seed)
    rows = []
    for n in range(count):
        prompt, answer = rng.randrange(8, 400), rng.randrange(8, 200)
        rows.append(
            {
                "id": f"conv-{n}",
                "conversations": [
                    {"from": "human", "value": text(prompt, f"q{n}")},
                    {"from": "gpt", "value": text(answer, f"a{n}")},
                    {"from": "human", "value": text(30, f"follow-up{n}")},
                    {"from": "gpt", "value": text(500, f"second{n}")},
                ],
            }
        )
    return rows


def sharegpt_json(count: int, seed: int = 1, broken: int = 0) -> bytes:
    """A ShareGPT dump (one JSON array), with ``broken`` rows no request can use at the end
    (one with no human turn, one empty)."""
    rows: list[dict[str, Any]] = sharegpt_rows(count, seed)
    for n in range(broken):
        rows.append(
            {"id": f"bad-{n}", "conversations": [{"from": "gpt", "value": "hello"}]}
            if n % 2 == 0
            else {"id": f"bad-{n}", "conversations": []}
        )
    return orjson.dumps(rows)


def chat_jsonl(count: int, seed: int = 2) -> bytes:
    """OpenAI chat JSONL: a system message, the user's prompt and the assistant's answer."""
    rng = random.Random(seed)
    lines = []
    for n in range(count):
        prompt, answer = rng.randrange(8, 300), rng.randrange(8, 120)
        messages = [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": text(prompt, f"u{n}")},
            {"role": "assistant", "content": text(answer, f"r{n}")},
        ]
        lines.append(orjson.dumps({"messages": messages}))
    return b"\n".join(lines) + b"\n"


def prompts_table(count: int, seed: int = 3) -> pa.Table:
    """A table with unusual column names: question text, answer length in tokens."""
    rng = random.Random(seed)
    return pa.table(
        {
            "uid": list(range(count)),
            "question": [text(rng.randrange(8, 600), f"t{n}") for n in range(count)],
            "answer_len": [rng.randrange(1, 64) for _ in range(count)],
        }
    )


def parquet_bytes(table: pa.Table, row_group_size: int | None = None) -> bytes:
    """The table as a Parquet file."""
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=row_group_size)
    return sink.getvalue()


HUB_COMMIT = "c0ffee" * 6 + "beef"


def hub_cache(root: Path, repo: str, files: dict[str, bytes], commit: str = HUB_COMMIT) -> Path:
    """A Hugging Face hub cache holding dataset ``repo`` at ``commit`` with ``files``
    (relative paths), as ``huggingface_hub`` lays one out; returns the cache directory
    (``HF_HUB_CACHE``)."""
    folder = root / f"datasets--{repo.replace('/', '--')}"
    snapshot = folder / "snapshots" / commit
    for name, data in files.items():
        path = snapshot / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    (folder / "refs").mkdir(parents=True, exist_ok=True)
    (folder / "refs" / "main").write_text(commit)
    return root
