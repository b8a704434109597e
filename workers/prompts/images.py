"""Generated images for ``workload.images`` (docs/workloads.md, "Images").

A run's images are a pool of ``distinct`` images made once per worker process, before
the stage clock starts (``prepared_image_pool``, in threads: Pillow releases the GIL while
it encodes), so that encoding never lands inside a measured request. Request ``seq``
takes the next ``count`` images of the pool in turn; the choice depends only on the seed,
the stage and ``seq``, so every provider and region gets the same bytes for the same
request (with the same Pillow build: the pixels are identical everywhere, and each record
keeps a digest of its images to check the bytes).

The content is not trivially compressible, so that encoded sizes are those of photos: a
colour gradient at a seeded angle, a dozen filled shapes, and a fifth of seeded noise
(SHAKE-256 bytes, half resolution, upscaled). PNGs come out at ~0.54 of raw RGB, JPEG and
WebP at quality 85 near 0.06 (docs/workloads.md has the table).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import os
import random
import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scenarios.limits import MAX_IMAGE_BYTES
from scenarios.workload.images import ImagesSpec, require_pillow

if TYPE_CHECKING:
    from PIL import Image

__all__ = [
    "GeneratedImage",
    "ImagePool",
    "RequestImages",
    "generate_image",
    "image_pool",
    "prepared_image_pool",
]

_MIME = {"png": "image/png", "jpeg": "image/jpeg", "webp": "image/webp"}
_SHAPES = 12
_NOISE_SHARE = 0.2


@dataclass(frozen=True, slots=True)
class GeneratedImage:
    """One encoded image, ready to send as a ``data:`` URL."""

    url: str  # data:<mime>;base64,<bytes>
    width: int
    height: int
    size: int  # encoded bytes (not base64)
    digest: str  # SHA-256 of the encoded bytes, hex


@dataclass(frozen=True, slots=True)
class RequestImages:
    """The images one request carries, and the ``detail`` it asks for."""

    images: tuple[GeneratedImage, ...]
    detail: str | None = None

    @property
    def count(self) -> int:
        """Images carried."""
        return len(self.images)

    @property
    def size(self) -> int:
        """Encoded bytes of all of them."""
        return sum(image.size for image in self.images)

    @property
    def pixels(self) -> int:
        """Pixels of all of them."""
        return sum(image.width * image.height for image in self.images)

    def digest(self) -> str:
        """A short digest of the images in order: equal for byte-identical images."""
        joined = ",".join(image.digest for image in self.images)
        return hashlib.sha256(joined.encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class ImagePool:
    """A run's distinct images; requests take them in turn."""

    images: tuple[GeneratedImage, ...]
    detail: str | None
    per_request: int  # the most images one request carries

    def for_request(self, seq: int, count: int) -> RequestImages:
        """Request ``seq``'s ``count`` images: the pool's next ones, in turn."""
        start = seq * self.per_request
        size = len(self.images)
        return RequestImages(
            tuple(self.images[(start + j) % size] for j in range(count)), self.detail
        )


def generate_image(width: int, height: int, fmt: str, quality: int, key: str) -> bytes:
    """One image of ``width`` × ``height`` encoded as ``fmt``, the same bytes for the same
    arguments (and Pillow build)."""
    require_pillow()
    from PIL import Image, ImageDraw, ImageOps  # noqa: PLC0415 - the optional extra

    rng = random.Random(key)

    def colour() -> tuple[int, int, int]:
        return rng.randrange(256), rng.randrange(256), rng.randrange(256)

    gradient = Image.linear_gradient("L").rotate(rng.uniform(0, 360), Image.Resampling.BILINEAR)
    picture = ImageOps.colorize(gradient.resize((width, height)), colour(), colour())
    draw = ImageDraw.Draw(picture)
    for _ in range(_SHAPES):
        x, y = rng.randrange(width), rng.randrange(height)
        box = (x, y, x + rng.randrange(1, width // 2 + 2), y + rng.randrange(1, height // 2 + 2))
        if rng.random() < 0.5:
            draw.ellipse(box, fill=colour())
        else:
            draw.rectangle(box, fill=colour())
    picture = Image.blend(picture, _noise(width, height, key), _NOISE_SHARE)
    out = io.BytesIO()
    options = {} if fmt == "png" else {"quality": quality}
    picture.save(out, format=fmt.upper(), **options)
    data = out.getvalue()
    if len(data) > MAX_IMAGE_BYTES:  # cannot happen within the pixel bound; a guard
        raise ValueError(f"a generated image took {len(data)} bytes, over {MAX_IMAGE_BYTES}")
    return data


def _noise(width: int, height: int, key: str) -> Image.Image:
    """Seeded RGB noise at half resolution, upscaled: photo-like local variation."""
    from PIL import Image  # noqa: PLC0415 - the optional extra

    small = (max(width // 2, 1), max(height // 2, 1))
    data = hashlib.shake_256(f"{key}/noise".encode()).digest(small[0] * small[1] * 3)
    return Image.frombytes("RGB", small, data).resize((width, height), Image.Resampling.BILINEAR)


def build_pool(spec: ImagesSpec, seed: int) -> ImagePool:
    """Generate the run's ``spec.distinct`` images (sizes drawn by their weights), in
    parallel threads."""
    require_pillow()
    choices = spec.size_choices()
    weights = [size.weight for size in choices]

    def one(index: int) -> GeneratedImage:
        key = f"{seed}/images/{index}"
        size = random.Random(f"{key}/size").choices(choices, weights=weights)[0]
        data = generate_image(size.width, size.height, spec.format, spec.quality, key)
        url = f"data:{_MIME[spec.format]};base64,{base64.b64encode(data).decode()}"
        return GeneratedImage(
            url, size.width, size.height, len(data), hashlib.sha256(data).hexdigest()
        )

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as threads:
        images = tuple(threads.map(one, range(spec.distinct)))
    return ImagePool(images, spec.detail, spec.max_count())


# Pools of this process by (spec, seed): every shard of a run on this worker shares one,
# generated once; the most recent few are kept.
_KEPT = 2
_pools: OrderedDict[str, Future[ImagePool]] = OrderedDict()
_lock = threading.Lock()
_generator = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tokenbench-images")


def _pool_future(spec: ImagesSpec, seed: int) -> Future[ImagePool]:
    key = f"{seed}/{spec.model_dump_json()}"
    with _lock:
        future = _pools.get(key)
        if future is None or (future.done() and future.exception() is not None):
            future = _pools[key] = _generator.submit(build_pool, spec, seed)
        _pools.move_to_end(key)
        while len(_pools) > _KEPT:
            _pools.popitem(last=False)
    return future


def image_pool(spec: ImagesSpec, seed: int) -> ImagePool:
    """The run's image pool, generated now if this process has not made it (blocking)."""
    return _pool_future(spec, seed).result()


async def prepared_image_pool(spec: ImagesSpec, seed: int) -> ImagePool:
    """The run's image pool, generated off the event loop if this process has not made
    it; concurrent shards of the run wait for the same generation."""
    return await asyncio.wrap_future(_pool_future(spec, seed))
