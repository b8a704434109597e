"""Which live requests are mirrored to the shadows.

With ``sample_by`` set, the decision is a pure function of that request field: a
salted SHA-256 of the value, read as a fraction in [0, 1), is compared with the sample
rate. The same user, session or conversation is then always in or always out, on
every gateway instance, and a test can compute the expected share exactly. Without
``sample_by`` (or when the field is absent) each request is an independent draw.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping
from typing import Any

import orjson

__all__ = ["Sampler", "hash_fraction", "messages_digest"]


def hash_fraction(value: bytes) -> float:
    """A uniform fraction in [0, 1) from the first 8 bytes of SHA-256(value)."""
    return int.from_bytes(hashlib.sha256(value).digest()[:8], "big") / 2**64


def messages_digest(messages: Any, salt: str) -> bytes:
    """Canonical bytes of a conversation (sorted keys), salted, for hashing."""
    return salt.encode() + orjson.dumps(messages, option=orjson.OPT_SORT_KEYS)


class Sampler:
    """Decides per request whether it is a shadow sample."""

    def __init__(
        self, rate: float, sample_by: str | None, salt: str, rng: random.Random | None = None
    ) -> None:
        self.rate = rate
        self.salt = salt
        self.kind, _, self.field = (sample_by or "").partition(":")
        self._rng = rng or random.Random()

    def value(self, body: Mapping[str, Any], headers: Mapping[str, str]) -> bytes | None:
        """The bytes the decision hashes, or None for a random draw."""
        if self.kind == "messages":
            return messages_digest(body.get("messages"), self.salt)
        if self.kind == "body":
            found = body.get(self.field)
            if found is None:
                return None
            raw = found.encode() if isinstance(found, str) else orjson.dumps(found)
            return self.salt.encode() + raw
        if self.kind == "header":
            header = headers.get(self.field)
            return None if header is None else self.salt.encode() + header.encode()
        return None

    def decide(self, body: Mapping[str, Any], headers: Mapping[str, str]) -> bool:
        """True when this request is mirrored to the shadows."""
        if self.rate <= 0:
            return False
        if self.rate >= 1:
            return True
        value = self.value(body, headers)
        draw = self._rng.random() if value is None else hash_fraction(value)
        return draw < self.rate
