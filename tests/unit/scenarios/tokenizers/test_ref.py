"""The tokenizer a workload names: a hub name, a local path or an uploaded dataset."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from scenarios.catalog import default_catalog
from scenarios.providers.simulate import SimulateSpec
from scenarios.tokenizers.files import looks_like_tokenizer
from scenarios.tokenizers.ref import TokenizerRef
from scenarios.workload.spec import Workload

MIX = [
    {"prompt_tokens": {"dist": "fixed", "value": 8}, "output_tokens": {"dist": "fixed", "value": 2}}
]


def test_a_string_is_a_hub_name() -> None:
    workload = Workload.model_validate(
        {"mix": MIX, "tokenizer": "meta-llama/Llama-3.1-8B-Instruct"}
    )
    assert workload.tokenizer == TokenizerRef(hub="meta-llama/Llama-3.1-8B-Instruct")
    assert workload.calibrate


@pytest.mark.parametrize("name", ["./tokenizer.json", "/etc/passwd", "../x", "a/b/c", "~/tok"])
def test_a_path_is_never_taken_for_a_hub_name(name: str) -> None:
    with pytest.raises(ValidationError, match=r"tokenizer\.hub"):
        Workload.model_validate({"mix": MIX, "tokenizer": name})


@pytest.mark.parametrize(
    "value",
    [{}, {"hub": "gpt2", "path": "t.json"}, {"path": "t.json", "revision": "main"}],
)
def test_exactly_one_source(value: dict[str, str]) -> None:
    with pytest.raises(ValidationError):
        TokenizerRef.model_validate(value)


def test_the_simulator_reads_a_hub_name_or_a_path_not_a_dataset() -> None:
    assert SimulateSpec(prompt_token_ratio=1.3).prompt_tokenizer is None
    with pytest.raises(ValidationError, match="not a dataset"):
        SimulateSpec.model_validate({"prompt_tokenizer": {"dataset": "ds-" + "0" * 64}})
    with pytest.raises(ValidationError):
        SimulateSpec(prompt_token_ratio=0)


def test_a_tokenizer_json_is_told_from_jsonl() -> None:
    assert looks_like_tokenizer(
        b'{\n  "version": "1.0",\n  "model": {"type": "BPE", "vocab": {}}\n}'
    )
    assert not looks_like_tokenizer(b'{"prompt": "a"}\n{"prompt": "b"}\n')
    assert not looks_like_tokenizer(b'{"prompt": "a", "model": "x"}\n')


def test_catalog_models_name_a_valid_hub_tokenizer() -> None:
    models = default_catalog().models.values()
    named = [model.tokenizer for model in models if model.tokenizer is not None]
    assert named and len(named) == len(list(models))
    for name in named:
        assert TokenizerRef.model_validate(name).hub == name


@pytest.mark.parametrize(
    "revision", ["main", "v1.2.3", "refs/pr/1", "0123456789abcdef0123456789abcdef01234567"]
)
def test_a_branch_tag_or_commit_is_a_revision(revision: str) -> None:
    assert TokenizerRef(hub="gpt2", revision=revision).revision == revision


@pytest.mark.parametrize(
    "revision", ["..", "main/../../etc", "a/..", ".hidden", "x/", "/x", "a//b", "v1..2", "-x"]
)
def test_a_revision_that_walks_paths_is_refused_with_its_field(revision: str) -> None:
    with pytest.raises(ValidationError) as refused:
        Workload.model_validate({"mix": MIX, "tokenizer": {"hub": "gpt2", "revision": revision}})
    assert [e["loc"] for e in refused.value.errors()] == [("tokenizer", "revision")]
