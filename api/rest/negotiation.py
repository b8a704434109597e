"""Content negotiation: which of a route's media types an ``Accept`` header prefers.

RFC 9110 §12.5.1: each media range of the header has a quality (``q``, 1 by default);
an offered type takes the quality of the most specific range that matches it (``a/b``
before ``a/*`` before ``*/*``), and a quality of 0 means "not acceptable". The offer of
highest quality wins, the route's own order breaking ties; no header, or an empty one,
accepts the route's first offer.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Protocol, TypeVar

from api.rest.errors import NotAcceptable, UnknownFormat

# A media range: type, subtype (either may be "*"), quality.
_Range = tuple[str, str, float]


def _quality(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        return 0.0  # a malformed weight accepts nothing rather than everything
    if math.isnan(value):
        return 0.0
    return min(max(value, 0.0), 1.0)


def _ranges(accept: str) -> Iterator[_Range]:
    for part in accept.split(","):
        media, *params = part.split(";")
        kind, slash, sub = media.strip().lower().partition("/")
        if not slash or not kind or not sub:
            continue
        q = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                q = _quality(value.strip())
        yield kind.strip(), sub.strip(), q


def _quality_of(media_type: str, ranges: list[_Range]) -> float:
    """The quality of the most specific range matching ``media_type`` (0 if none)."""
    kind, _, sub = media_type.lower().partition("/")
    best: tuple[int, float] = (-1, 0.0)  # (specificity, quality)
    for r_kind, r_sub, q in ranges:
        if (r_kind, r_sub) == (kind, sub):
            specificity = 2
        elif (r_kind, r_sub) == (kind, "*"):
            specificity = 1
        elif (r_kind, r_sub) == ("*", "*"):
            specificity = 0
        else:
            continue
        # Equally specific ranges repeated: the first one counts.
        if specificity > best[0]:
            best = (specificity, q)
    return best[1]


def preferred(accept: str | None, offers: Mapping[str, str]) -> str | None:
    """The name of the offer (name → media type, in the route's order of preference) that
    ``accept`` prefers; the first offer without a header; None when it accepts none."""
    if not offers:
        return None
    if accept is None or not accept.strip():
        return next(iter(offers))
    ranges = list(_ranges(accept))
    if not ranges:
        return next(iter(offers))  # nothing parseable: as if no header was sent
    chosen, chosen_q = None, 0.0
    for name, media_type in offers.items():
        q = _quality_of(media_type, ranges)
        if q > chosen_q:
            chosen, chosen_q = name, q
    return chosen


class _Format(Protocol):
    @property
    def media_type(self) -> str: ...


F = TypeVar("F", bound=_Format)


def chosen_format(name: str | None, accept: str | None, formats: Mapping[str, F]) -> F:
    """The format named by ``?format=``, else the one ``Accept`` prefers (the first of
    ``formats`` when it names nothing); an unknown name is a 422, an Accept header served
    by none a 406."""
    if name is not None:
        if name not in formats:
            raise UnknownFormat(name, list(formats))
        return formats[name]
    media = {key: fmt.media_type for key, fmt in formats.items()}
    chosen = preferred(accept, media)
    if chosen is None:
        raise NotAcceptable(accept or "", media)
    return formats[chosen]
