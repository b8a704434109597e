"""workload.images: shapes, bounds (each naming its field), the dialects that can send
images, and the install command when Pillow is missing."""

from __future__ import annotations

import builtins
from typing import Any

import pytest

from scenarios import limits
from scenarios.loader import ScenarioError, validate_scenario
from scenarios.workload.images import IMAGE_KINDS, ImagesSpec, ImagesUnavailable, require_pillow


def scenario(images: dict[str, Any], kind: str = "simulated") -> dict[str, Any]:
    provider: dict[str, Any] = {"name": "p", "kind": kind}
    if kind != "simulated":
        provider.update({"base_url": "http://127.0.0.1:9/v1", "model": "m"})
    length = {"dist": "fixed", "value": 4}
    return {
        "name": "images",
        "providers": [provider],
        "workload": {"mix": [{"prompt_tokens": length, "output_tokens": length}], "images": images},
        "load": {"concurrency": [1], "requests_per_level": 2},
    }


def problems(data: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ScenarioError) as caught:
        validate_scenario(data)
    return {p.path: p.message for p in caught.value.problems}


def test_defaults_are_one_512_png_per_request_from_a_pool_of_32() -> None:
    spec = validate_scenario(scenario({})).workload.images
    assert spec is not None
    assert (spec.fraction, spec.max_count(), spec.format, spec.distinct) == (1.0, 1, "png", 32)
    assert [(s.width, s.height) for s in spec.size_choices()] == [(512, 512)]
    assert spec.detail is None


def test_sizes_and_count_ranges() -> None:
    spec = ImagesSpec.model_validate(
        {
            "count": {"dist": "uniform", "min": 1, "max": 3},
            "sizes": [{"width": 640, "height": 480, "weight": 3}, {"width": 64, "height": 64}],
            "format": "webp",
            "detail": "low",
        }
    )
    assert spec.max_count() == 3
    assert spec.max_pixels() == 640 * 480


@pytest.mark.parametrize(
    ("images", "path", "words"),
    [
        ({"width": limits.MAX_IMAGE_SIDE + 1, "height": 8}, "workload.images.width", "less than"),
        ({"width": 4096, "height": 4096}, "workload.images", "an image may have"),
        ({"count": limits.MAX_IMAGES_PER_REQUEST + 1}, "workload.images.count", "1 to 64"),
        (
            {"count": 64, "width": 1024, "height": 1024, "distinct": 64},
            "workload.images",
            "one request",
        ),
        ({"count": 4, "distinct": 2}, "workload.images", "at least count"),
        ({"width": 2048, "height": 2048, "distinct": 32}, "workload.images", "lower distinct"),
        ({"width": 64}, "workload.images", "both width and height"),
        (
            {"width": 64, "height": 64, "sizes": [{"width": 8, "height": 8}]},
            "workload.images",
            "not both",
        ),
        ({"format": "gif"}, "workload.images.format", "png"),
        ({"fraction": 1.5}, "workload.images.fraction", "less than"),
    ],
)
def test_bounds_name_the_field(images: dict[str, Any], path: str, words: str) -> None:
    found = problems(scenario(images))
    assert path in found, found
    assert words in found[path]


def test_the_largest_valid_images_are_accepted() -> None:
    side = 2048  # 4 MP: 4 per request and 16 in the pool are the bounds
    spec = ImagesSpec.model_validate({"width": side, "height": side, "count": 4, "distinct": 16})
    assert spec.max_count() * spec.max_pixels() == limits.MAX_REQUEST_IMAGE_PIXELS
    assert spec.distinct * spec.max_pixels() == limits.MAX_IMAGE_POOL_PIXELS


@pytest.mark.parametrize("kind", ["tgi", "llamacpp", "openai-completions"])
def test_dialects_without_images_are_refused_naming_the_provider(kind: str) -> None:
    assert kind not in IMAGE_KINDS
    message = problems(scenario({}, kind))[""]
    assert "workload.images" in message and "'p'" in message and kind in message


@pytest.mark.parametrize("kind", sorted(IMAGE_KINDS - {"azure-openai"}))
def test_chat_dialects_accept_images(kind: str) -> None:
    assert validate_scenario(scenario({}, kind)).workload.images is not None


def test_missing_pillow_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_pil(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "PIL" or name.startswith("PIL."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pil)
    with pytest.raises(ImagesUnavailable, match=r"pip install 'tokenbench\[images\]'"):
        require_pillow()
