"""A tiny tokenizer trained at test time (no download): byte-level BPE or word-level.

Trained on sentences of the common words prompts are made of, with a small vocabulary,
so that frequent words are one token and the rest split into several: a server counting
with it reports a different length than one word per token, as real tokenizers do.
"""

from __future__ import annotations

import random
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from workers.prompts.plan import WORDS

EXTRA_WORDS = ("tokenization", "benchmarking", "latency", "throughput", "prefill", "decode")


def _corpus(seed: int = 7, lines: int = 400) -> list[str]:
    rng = random.Random(seed)
    # Zipf-like: early words much more frequent, so only they become whole tokens.
    weights = [1 / (rank + 1) for rank in range(len(WORDS))]
    return [
        " ".join([*rng.choices(WORDS, weights=weights, k=40), *rng.choices(EXTRA_WORDS, k=3)])
        for _ in range(lines)
    ]


def train_bpe(path: Path, vocab_size: int = 420) -> Path:
    """Train a byte-level BPE tokenizer and save it as ``path`` (a tokenizer.json)."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_corpus(), trainer)
    tokenizer.save(str(path))
    return path


def train_word_level(path: Path) -> Path:
    """Train a word-level tokenizer (whitespace words; unknown words are [UNK])."""
    tokenizer = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.WordLevelTrainer(special_tokens=["[UNK]"], show_progress=False)
    tokenizer.train_from_iterator(_corpus(), trainer)
    tokenizer.save(str(path))
    return path
