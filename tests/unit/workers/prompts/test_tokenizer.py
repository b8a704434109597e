"""Loading the workload's tokenizer: hub names from the local Hugging Face cache, never
the network in tests (offline mode); local files for the local user."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from huggingface_hub import constants

from scenarios.tokenizers.files import TokenizerUnavailable
from scenarios.tokenizers.ref import TokenizerRef
from tests.support.tiny_tokenizer import train_bpe
from workers.prompts.tokenizer import hub_tokenizer_file, load_local_tokenizer

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def hub_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A Hugging Face cache holding `tiny-org/tiny-model`'s tokenizer.json, offline."""
    repo = tmp_path / "hub" / "models--tiny-org--tiny-model"
    snapshot = repo / "snapshots" / COMMIT
    snapshot.mkdir(parents=True)
    train_bpe(snapshot / "tokenizer.json")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # a download attempt fails at once
    hub_tokenizer_file.cache_clear()
    yield tmp_path / "hub"
    hub_tokenizer_file.cache_clear()


def test_a_hub_name_is_read_from_the_local_cache(hub_cache: Path) -> None:
    tokenizer = load_local_tokenizer(TokenizerRef.model_validate("tiny-org/tiny-model"))
    assert tokenizer.get_vocab_size() > 256
    assert hub_tokenizer_file("tiny-org/tiny-model", None).is_relative_to(hub_cache)


def test_a_hub_name_neither_cached_nor_reachable_says_what_to_do(hub_cache: Path) -> None:
    with pytest.raises(TokenizerUnavailable, match="not in this worker's Hugging Face cache"):
        load_local_tokenizer(TokenizerRef.model_validate("tiny-org/absent"))


def test_a_local_file_or_its_directory(tmp_path: Path) -> None:
    path = train_bpe(tmp_path / "tokenizer.json")
    by_file = load_local_tokenizer(TokenizerRef(path=str(path)))
    by_dir = load_local_tokenizer(TokenizerRef(path=str(tmp_path)))
    assert by_file.get_vocab() == by_dir.get_vocab()
    (tmp_path / "empty").mkdir()
    with pytest.raises(TokenizerUnavailable, match=r"no tokenizer\.json"):
        load_local_tokenizer(TokenizerRef(path=str(tmp_path / "empty")))
    (tmp_path / "bad.json").write_text('{"model": {"type": "nonsense"}}')
    with pytest.raises(TokenizerUnavailable, match=r"not a tokenizer\.json"):
        load_local_tokenizer(TokenizerRef(path=str(tmp_path / "bad.json")))
