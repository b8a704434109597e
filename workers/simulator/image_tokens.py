"""Image tokens of the simulated endpoint: the images of a chat request and their tokens.

Images arrive as ``image_url`` content parts with ``data:`` URLs (the simulator fetches
nothing). Only the header is decoded to learn the size (Pillow reads it lazily), so a
multi-megabyte image costs the simulator microseconds, not the milliseconds of a full
decode. Two rules, chosen by ``simulate.image_token_rule`` (docs/workloads.md):

- ``tiles``: the image is scaled down (never up) to fit a 2048 × 2048 square, then so its
  short side is at most 768 px; it costs 85 tokens plus 170 per 512-px tile that covers
  it. ``detail: low`` is 85 whatever the size; ``auto`` counts as ``high``.
- ``patches``: one token per ``image_patch_px`` square, ``ceil(w / p) · ceil(h / p)``, as
  vision transformers that merge 14-px patches 2 × 2 (28 px a token) do, without resizing.
"""

from __future__ import annotations

import binascii
import io
import math
from typing import Any

from scenarios.limits import MAX_IMAGE_PIXELS
from scenarios.providers.simulate import SimulateSpec
from scenarios.workload.images import INSTALL_HINT

__all__ = ["ImageRefused", "image_tokens", "patch_tokens", "tile_tokens"]

TILE_BASE_TOKENS = 85
TILE_TOKENS = 170
TILE_PX = 512
FIT_PX = 2048
SHORT_SIDE_PX = 768
# Base64 characters decoded to read an image's header: PNG's size is in its first 33
# bytes, JPEG's frame header follows its tables (an EXIF block may push it further:
# then the whole image is decoded).
_HEADER_CHARS = 4096
# Characters of a data: URL before its comma (``data:image/png;base64``).
_MAX_HEAD_CHARS = 256


class ImageRefused(ValueError):
    """An image part the simulator cannot count (the message goes back as a 400)."""


def tile_tokens(width: int, height: int, detail: str | None) -> int:
    """Tokens of one image under the tiles rule."""
    if detail == "low":
        return TILE_BASE_TOKENS
    w, h = float(width), float(height)
    fit = min(1.0, FIT_PX / max(w, h))
    w, h = w * fit, h * fit
    short = min(1.0, SHORT_SIDE_PX / min(w, h))
    w, h = w * short, h * short
    tiles = math.ceil(round(w, 6) / TILE_PX) * math.ceil(round(h, 6) / TILE_PX)
    return TILE_BASE_TOKENS + TILE_TOKENS * tiles


def patch_tokens(width: int, height: int, patch_px: int) -> int:
    """Tokens of one image under the patches rule."""
    return math.ceil(width / patch_px) * math.ceil(height / patch_px)


def image_tokens(messages: list[dict[str, Any]], spec: SimulateSpec) -> int:
    """Image tokens of a chat request's messages (0 without images); raises ImageRefused
    for an image part that is not a readable ``data:`` image."""
    total = 0
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "image_url":
                continue
            image_url = part.get("image_url")
            if not isinstance(image_url, dict) or not isinstance(image_url.get("url"), str):
                raise ImageRefused("an image_url part needs {url: ...}")
            width, height = _image_size(image_url["url"])
            if spec.image_token_rule == "patches":
                total += patch_tokens(width, height, spec.image_patch_px)
            else:
                total += tile_tokens(width, height, image_url.get("detail"))
    return total


def _image_size(url: str) -> tuple[int, int]:
    if not url.startswith("data:"):
        raise ImageRefused("the simulator reads images from data: URLs only")
    # Slices of the URL, never a copy of all of it: it may be megabytes.
    comma = url.find(",", 0, _MAX_HEAD_CHARS)
    if comma < 0 or not url[:comma].endswith(";base64"):
        raise ImageRefused("an image data: URL must be base64")
    start = comma + 1
    size = _webp_size(binascii.a2b_base64(url[start : start + 40]))
    if size is not None:
        return _bounded(*size)
    try:
        from PIL import Image  # noqa: PLC0415 - the optional extra, needed only for images
    except ImportError:
        raise ImageRefused(f"the simulator needs Pillow to read images: {INSTALL_HINT}") from None
    for end in (start + _HEADER_CHARS, len(url)):  # the header, else the whole image
        try:
            data = binascii.a2b_base64(url[start : start + (end - start) // 4 * 4])
            with Image.open(io.BytesIO(data)) as image:
                width, height = image.size
        except (binascii.Error, OSError, ValueError, Image.DecompressionBombError):
            continue
        return _bounded(width, height)
    raise ImageRefused("invalid image data")


def _bounded(width: int, height: int) -> tuple[int, int]:
    if width * height > MAX_IMAGE_PIXELS:
        raise ImageRefused(f"an image of {width}x{height} is over {MAX_IMAGE_PIXELS} pixels")
    return width, height


def _webp_size(head: bytes) -> tuple[int, int] | None:
    """A WebP's canvas size from its first 30 bytes, or None if it is not a WebP: Pillow
    opens a WebP by decoding it whole (milliseconds), its RIFF header has the size."""
    if len(head) < 30 or head[:4] != b"RIFF" or head[8:12] != b"WEBP":
        return None
    chunk = head[12:16]
    if chunk == b"VP8X":  # extended: 24-bit canvas width - 1 and height - 1
        return int.from_bytes(head[24:27], "little") + 1, int.from_bytes(head[27:30], "little") + 1
    if chunk == b"VP8 " and head[23:26] == b"\x9d\x01\x2a":  # lossy key frame
        return (
            int.from_bytes(head[26:28], "little") & 0x3FFF,
            int.from_bytes(head[28:30], "little") & 0x3FFF,
        )
    if chunk == b"VP8L" and head[20] == 0x2F:  # lossless: 14-bit width - 1, height - 1
        bits = int.from_bytes(head[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    return None
