"""The simulator's image-token rules (tiles, patches) and reading sizes from data: URLs."""

from __future__ import annotations

import base64
import io
from typing import Any

import pytest
from PIL import Image

from scenarios.providers.simulate import SimulateSpec
from workers.prompts.images import generate_image
from workers.simulator.image_tokens import ImageRefused, image_tokens, patch_tokens, tile_tokens
from workers.simulator.server import SimulatorApp, _Prompt


@pytest.mark.parametrize(
    ("size", "detail", "tokens"),
    [
        ((1024, 1024), "high", 765),  # scaled to 768 x 768: 4 tiles
        ((2048, 4096), None, 1105),  # 1024 x 2048, then 768 x 1536: 6 tiles
        ((512, 512), "auto", 255),  # never scaled up: 1 tile
        ((800, 600), None, 765),  # short side under 768: 2 x 2 tiles
        ((4000, 3000), "high", 765),  # 2048 x 1536, then 1024 x 768: 2 x 2 tiles
        ((4000, 3000), "low", 85),
    ],
)
def test_tiles(size: tuple[int, int], detail: str | None, tokens: int) -> None:
    assert tile_tokens(*size, detail) == tokens


def test_patches() -> None:
    assert patch_tokens(448, 448, 28) == 256
    assert patch_tokens(449, 28, 28) == 17
    assert patch_tokens(10, 10, 14) == 1


def _part(data: bytes, mime: str = "image/png", **extra: Any) -> dict[str, Any]:
    url = f"data:{mime};base64,{base64.b64encode(data).decode()}"
    return {"type": "image_url", "image_url": {"url": url, **extra}}


def test_sizes_are_read_from_data_urls_by_the_chosen_rule() -> None:
    png = generate_image(600, 500, "png", 85, "k")
    jpeg = generate_image(30, 60, "jpeg", 80, "k")
    messages = [
        {"role": "system", "content": "plain text"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "two images"},
                _part(png),
                _part(jpeg, "image/jpeg", detail="low"),
            ],
        },
    ]
    assert image_tokens(messages, SimulateSpec()) == 425 + 85  # 600 x 500: 2 x 1 tiles; low
    patches = SimulateSpec(image_token_rule="patches", image_patch_px=28)
    assert image_tokens(messages, patches) == 22 * 18 + 2 * 3
    assert image_tokens([{"role": "user", "content": "no images"}], SimulateSpec()) == 0


@pytest.mark.parametrize(
    ("part", "words"),
    [
        ({"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}, "data: URLs"),
        ({"type": "image_url", "image_url": {"url": "data:image/png,raw"}}, "base64"),
        ({"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}, "invalid"),
        ({"type": "image_url", "image_url": "nope"}, "{url"),
    ],
)
def test_unreadable_images_are_refused(part: dict[str, Any], words: str) -> None:
    with pytest.raises(ImageRefused, match=words):
        image_tokens([{"role": "user", "content": [part]}], SimulateSpec())


def test_usage_splits_image_and_text_tokens_unless_told_not_to() -> None:
    split = SimulatorApp(SimulateSpec()).usage(_Prompt(300, images=255), 4)
    assert b'"prompt_tokens_details":{"image_tokens":255,"text_tokens":45}' in split
    summed = SimulatorApp(SimulateSpec(report_image_tokens=False)).usage(
        _Prompt(300, images=255), 4
    )
    assert b"prompt_tokens_details" not in summed and b'"prompt_tokens":300' in summed
    assert b"prompt_tokens_details" not in SimulatorApp(SimulateSpec()).usage(_Prompt(9), 4)


@pytest.mark.parametrize(
    "options", [{"quality": 80}, {"lossless": True}, {"exif": b"Exif\x00\x00x"}]
)
def test_webp_sizes_come_from_the_riff_header(options: dict[str, Any]) -> None:
    image = Image.new("RGBA" if "exif" in options else "RGB", (123, 45), (9, 8, 7))
    out = io.BytesIO()
    image.save(out, format="WEBP", **options)
    messages = [{"role": "user", "content": [_part(out.getvalue(), "image/webp")]}]
    assert image_tokens(messages, SimulateSpec(image_token_rule="patches", image_patch_px=1)) == (
        123 * 45
    )
