"""The probe a tokenizer must encode in time (pure parts of scenarios/tokenizers/probe.py;
the child process is exercised in tests/security/test_tokenizer_limits.py)."""

from __future__ import annotations

from scenarios.tokenizers.probe import probe_texts


def test_the_probe_holds_prose_runs_and_the_vocabulary_as_prompts() -> None:
    texts = probe_texts(["hello", "world", "<s>", "12"])
    joined = "".join(texts)
    assert "The quick brown fox" in texts[0]
    assert "a" * 48 + "!" in joined and "0" * 24 + "!" in joined  # runs ended by another char
    assert "hello world." in texts  # the vocabulary's words, as workers make prompts
    assert "<s>" not in joined.split("hello")[-1]  # only alphabetic words are joined


def test_the_probe_is_a_few_kilobytes_whatever_the_vocabulary() -> None:
    texts = probe_texts([f"w{'x' * (i % 7)}" for i in range(100_000)])
    assert 2_000 < sum(len(text) for text in texts) < 20_000
