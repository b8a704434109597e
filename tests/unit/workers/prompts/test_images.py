"""Generated images: deterministic bytes of the asked size and format, photo-like (not
trivially compressible) sizes, and a pool that requests take in turn and shards share."""

from __future__ import annotations

import asyncio
import base64
import io

import pytest
from PIL import Image

from scenarios.limits import MAX_IMAGE_BYTES
from scenarios.workload.images import ImagesSpec
from workers.prompts.images import build_pool, generate_image, image_pool, prepared_image_pool


@pytest.mark.parametrize(
    ("fmt", "pil_format"), [("png", "PNG"), ("jpeg", "JPEG"), ("webp", "WEBP")]
)
def test_an_image_has_its_size_format_and_the_same_bytes_each_time(
    fmt: str, pil_format: str
) -> None:
    data = generate_image(96, 64, fmt, 85, "seed/images/0")
    assert data == generate_image(96, 64, fmt, 85, "seed/images/0")
    assert data != generate_image(96, 64, fmt, 85, "seed/images/1")
    with Image.open(io.BytesIO(data)) as image:
        assert (image.format, image.size, image.mode) == (pil_format, (96, 64), "RGB")
    assert len(data) <= MAX_IMAGE_BYTES


def test_pngs_are_not_trivially_compressible() -> None:
    # A flat or plain-gradient PNG would be a few KB; the noise keeps it photo-like.
    data = generate_image(256, 256, "png", 85, "k")
    assert len(data) > 0.3 * 256 * 256 * 3
    jpeg = generate_image(256, 256, "jpeg", 85, "k")
    assert 0.02 * 256 * 256 * 3 < len(jpeg) < len(data)


def test_the_pool_draws_sizes_by_weight_and_requests_take_it_in_turn() -> None:
    spec = ImagesSpec.model_validate(
        {
            "count": {"dist": "uniform", "min": 1, "max": 2},
            "sizes": [{"width": 32, "height": 16}, {"width": 16, "height": 16, "weight": 3}],
            "format": "jpeg",
            "detail": "high",
            "distinct": 6,
        }
    )
    pool = build_pool(spec, 7)
    assert len(pool.images) == 6 and pool.per_request == 2
    assert {(i.width, i.height) for i in pool.images} <= {(32, 16), (16, 16)}
    assert len({i.digest for i in pool.images}) == 6  # distinct images
    first = pool.images[0]
    head, data = first.url.split(",", 1)
    assert head == "data:image/jpeg;base64"
    assert len(base64.b64decode(data)) == first.size
    request = pool.for_request(1, 2)  # slots 2 and 3
    assert request.images == pool.images[2:4] and request.detail == "high"
    assert request.count == 2 and request.size == sum(i.size for i in pool.images[2:4])
    assert request.pixels == sum(i.width * i.height for i in pool.images[2:4])
    assert pool.for_request(4, 1).images == (pool.images[2],)  # slot 8 wraps to 2
    assert pool.for_request(1, 2).digest() == request.digest() != pool.for_request(2, 2).digest()
    assert build_pool(spec, 7) == pool  # the same seed makes the same bytes


def test_shards_of_a_run_share_one_generation() -> None:
    spec = ImagesSpec.model_validate({"width": 24, "height": 24, "distinct": 3})

    async def two_shards() -> tuple[object, object]:
        a, b = await asyncio.gather(prepared_image_pool(spec, 11), prepared_image_pool(spec, 11))
        return a, b

    a, b = asyncio.run(two_shards())
    assert a is b is image_pool(spec, 11)
    assert image_pool(spec, 12) is not a
