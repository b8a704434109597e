"""The building blocks of every scenario model: strict, immutable, finite, named."""

from __future__ import annotations

import re

import pytest
from pydantic import TypeAdapter, ValidationError

from scenarios.base import ENV_VAR_PATTERN, NAME_PATTERN, Name, StrictModel


class Limits(StrictModel):
    name: Name
    rate: float = 1.0


def test_unknown_keys_are_errors_naming_the_key() -> None:
    with pytest.raises(ValidationError) as caught:
        Limits.model_validate({"name": "a", "rtae": 2.0})
    (error,) = caught.value.errors()
    assert error["type"] == "extra_forbidden" and error["loc"] == ("rtae",)


def test_models_are_immutable() -> None:
    limits = Limits(name="a")
    with pytest.raises(ValidationError):
        limits.rate = 2.0  # type: ignore[misc]
    assert hash(limits) == hash(Limits(name="a"))  # frozen models can key a dict


@pytest.mark.parametrize("value", ["inf", "-Infinity", "NaN"])
def test_infinity_and_nan_are_refused_with_the_fields_path(value: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Limits.model_validate_json(f'{{"name": "a", "rate": "{value}"}}')
    assert caught.value.errors()[0]["loc"] == ("rate",)
    with pytest.raises(ValidationError):
        Limits(name="a", rate=float(value))


@pytest.mark.parametrize("name", ["a", "api-1", "eu_west.2", "9", "x" * 64])
def test_valid_names(name: str) -> None:
    assert TypeAdapter(Name).validate_python(name) == name


@pytest.mark.parametrize("name", ["", "-a", ".hidden", "a b", "a/b", "ü", "x" * 65, "a\n"])
def test_invalid_names(name: str) -> None:
    with pytest.raises(ValidationError):
        TypeAdapter(Name).validate_python(name)


def test_name_pattern_matches_whole_values_only() -> None:
    # Names become shard ids, Redis keys and file names: a valid prefix is not enough.
    assert re.search(NAME_PATTERN, "ok;rm -rf /") is None
    with pytest.raises(ValidationError):
        TypeAdapter(Name).validate_python("ok;rm -rf /")


@pytest.mark.parametrize(
    ("variable", "valid"),
    [("OPENAI_API_KEY", True), ("_X1", True), ("1KEY", False), ("KEY-NAME", False), ("", False)],
)
def test_environment_variable_pattern(variable: str, valid: bool) -> None:
    assert (re.search(ENV_VAR_PATTERN, variable) is not None) is valid
