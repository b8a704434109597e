"""How the simulated endpoint counts prompt tokens: words at a ratio, or a tokenizer."""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer

from scenarios.providers.simulate import SimulateSpec
from tests.support.tiny_tokenizer import train_bpe
from workers.simulator.server import SimulatorApp


def _messages(*texts: str) -> list[dict[str, object]]:
    return [{"role": "user", "content": text} for text in texts]


def test_words_at_a_ratio() -> None:
    plain = SimulatorApp(SimulateSpec())
    assert plain.count_prompt(_messages("a b c", "d e")) == 5
    ratio = SimulatorApp(SimulateSpec(prompt_token_ratio=1.3))
    assert ratio.count_prompt(_messages(" ".join(["w"] * 100))) == 130
    assert ratio.count_prompt(_messages("")) == 1
    parts = [{"role": "user", "content": [{"type": "text", "text": "one two"}]}]
    assert ratio.count_prompt(parts) == 3  # round(2 × 1.3)


def test_with_a_tokenizer(tmp_path: Path) -> None:
    path = train_bpe(tmp_path / "tokenizer.json")
    app = SimulatorApp(SimulateSpec.model_validate({"prompt_tokenizer": {"path": str(path)}}))
    tokenizer = Tokenizer.from_file(str(path))
    texts = ("the latency of the city", "throughput was benchmarking")
    expected = sum(len(tokenizer.encode(t, add_special_tokens=False).ids) for t in texts)
    assert app.count_prompt(_messages(*texts)) == expected
    assert expected > sum(len(t.split()) for t in texts)  # not one token a word
