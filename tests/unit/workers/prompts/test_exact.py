"""Prompts of exactly the planned number of tokens, with tokenizers trained here."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from scenarios.datasets.files import parse_entries
from scenarios.tokenizers.files import TokenizerUnavailable
from scenarios.workload.prefix_cache import PrefixCacheSpec
from scenarios.workload.spec import FixedLength, MixClass, UniformLength, Workload
from tests.support.tiny_tokenizer import train_bpe, train_word_level
from workers.prompts.exact import ExactPrompts, encoding_errors
from workers.prompts.plan import WORDS, RepeatedText, repeated_share, request_planner

LENGTHS = (1, 2, 3, 7, 64, 333, 2048)


@pytest.fixture(scope="module", params=["bpe", "word-level"])
def exact(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> ExactPrompts:
    train: Callable[[Path], Path] = train_bpe if request.param == "bpe" else train_word_level
    path = train(tmp_path_factory.mktemp("tok") / "tokenizer.json")
    return ExactPrompts(Tokenizer.from_file(str(path)), tuple(WORDS))


def test_every_length_is_exact_when_encoded(exact: ExactPrompts) -> None:
    rng = random.Random(3)
    for tokens in LENGTHS:
        for _ in range(5):
            text = exact.make(tokens, rng)
            assert exact.count(text) == tokens, (tokens, text[:80])


def test_prompts_are_words_of_the_vocabulary_and_deterministic_by_seed(
    exact: ExactPrompts,
) -> None:
    first = exact.make(200, random.Random("7/0/1"))
    assert first == exact.make(200, random.Random("7/0/1"))
    assert first != exact.make(200, random.Random("7/0/2"))
    assert set(first.split()) <= set(exact.pieces)
    unknown = getattr(exact.tokenizer.model, "unk_token", None)
    assert unknown not in exact.tokenizer.encode(first).tokens


def test_a_shared_prefix_is_counted_in_the_exact_length(exact: ExactPrompts) -> None:
    prefix = exact.prefix(100, seed=5)
    assert exact.count(prefix) == 100
    assert prefix == exact.prefix(100, seed=5)
    for tokens in (101, 150, 700):
        text = exact.make(tokens, random.Random(tokens), prefix)
        assert text.startswith(prefix + " ")
        assert exact.count(text) == tokens


def test_the_planner_plans_what_the_tokenizer_counts(exact: ExactPrompts) -> None:
    workload = Workload(
        mix=[
            MixClass(
                prompt_tokens=UniformLength(dist="uniform", min=1, max=900),
                output_tokens=FixedLength(dist="fixed", value=4),
            )
        ],
        shared_prefix_tokens=20,
    )
    plan = request_planner(workload, 11, 0, maker=exact)
    for seq in range(40):
        request = plan(seq)
        assert request.prompt_source == "tokenizer"
        assert exact.count(request.prompt) == request.prompt_tokens
        assert request == plan(seq)  # the same request for every provider and region


def test_prompt_files_are_counted_with_the_tokenizer(exact: ExactPrompts) -> None:
    lines = b'{"prompt": "the city of the river was known"}\n{"prompt": "a b"}\n'
    entries = parse_entries(lines, "p.jsonl", replay=False)
    workload = Workload.model_validate(
        {
            "prompts": {"dataset": "ds-" + "0" * 64},
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": 1},
                    "output_tokens": {"dist": "fixed", "value": 2},
                }
            ],
        }
    )
    plan = request_planner(workload, 1, 0, entries, exact)
    for seq in range(2):
        request = plan(seq)
        assert request.prompt_source == "tokenizer"
        assert request.prompt_tokens == max(exact.count(request.prompt), 1)


class PanicException(BaseException):
    """Stands in for pyo3's PanicException (a BaseException, not an Exception)."""


def test_a_panic_while_encoding_is_a_tokenizer_error_not_an_escape() -> None:
    panic = PanicException("Onig: Regex search error: retry-limit-in-match over")
    with pytest.raises(TokenizerUnavailable, match="retry-limit-in-match"), encoding_errors():
        raise panic
    with pytest.raises(TokenizerUnavailable, match="bad input"), encoding_errors():
        raise ValueError("bad input")
    with pytest.raises(KeyboardInterrupt), encoding_errors():
        raise KeyboardInterrupt


@pytest.mark.parametrize("target", [0.5, 0.9])
def test_a_target_hit_rate_repeats_exactly_that_many_tokens(
    exact: ExactPrompts, target: float
) -> None:
    workload = Workload(
        mix=[
            MixClass(
                prompt_tokens=UniformLength(dist="uniform", min=40, max=700),
                output_tokens=FixedLength(dist="fixed", value=4),
            )
        ],
        prefix_cache=PrefixCacheSpec(target_hit_rate=target),
    )
    plan = request_planner(workload, 5, 1, maker=exact)
    longest: list[int] = []
    for seq in range(30):
        request = plan(seq)
        share = repeated_share(request.prompt_tokens, target)
        ids = exact.tokenizer.encode(request.prompt, add_special_tokens=False).ids
        assert len(ids) == request.prompt_tokens  # the whole prompt: exact
        assert request.cached_prefix_tokens == (0 if seq == 0 else share)
        # Its first `share` tokens are the stage's text cut at exactly `share` tokens,
        # token for token, and what every earlier prompt sent first.
        cut = exact.repeated(share, RepeatedText(exact.vocabulary, "5/1/prefix-cache"))
        assert exact.tokenizer.encode(cut, add_special_tokens=False).ids == ids[:share]
        common = min(share, len(longest))
        assert ids[:common] == longest[:common]
        if share > len(longest):
            longest = ids[:share]
