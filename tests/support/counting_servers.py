"""A scenario against three simulated endpoints that count prompt tokens their own way.

One word a token (`sim-words`), 1.3 tokens a word (`sim-ratio`, like English BPE) and a
real tokenizer (`sim-tokenizer`); shared by the exact-lengths tests and
`benchmarks/prompt_lengths.py`, which measure the same thing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

FAST = {"ttft_ms": 2, "itl_ms": 1}


def counting_servers_scenario(
    name: str, tokenizer: Path, workload: dict[str, Any], requests: int
) -> dict[str, Any]:
    """Prompts of 800–1,600 planned tokens, closed loop at concurrency 1 then 4."""
    return {
        "name": name,
        "seed": 3,
        "providers": [
            {"name": "sim-words", "kind": "simulated", "simulate": FAST},
            {
                "name": "sim-ratio",
                "kind": "simulated",
                "simulate": {**FAST, "prompt_token_ratio": 1.3},
            },
            {
                "name": "sim-tokenizer",
                "kind": "simulated",
                "simulate": {**FAST, "prompt_tokenizer": {"path": str(tokenizer)}},
            },
        ],
        "workload": {
            "mix": [
                {
                    "prompt_tokens": {"dist": "uniform", "min": 800, "max": 1600},
                    "output_tokens": {"dist": "fixed", "value": 4},
                }
            ],
            **workload,
        },
        "load": {"concurrency": [1, 4], "requests_per_level": requests},
    }
