"""api/rest/negotiation.py: the offer an Accept header prefers, by quality and
specificity (RFC 9110), the route's order breaking ties; none when nothing is acceptable."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from api.rest.errors import NotAcceptable, UnknownFormat
from api.rest.negotiation import chosen_format, preferred

OFFERS = {"json": "application/json", "markdown": "text/markdown", "html": "text/html"}


@pytest.mark.parametrize(
    ("accept", "chosen"),
    [
        (None, "json"),
        ("", "json"),
        ("*/*", "json"),
        ("application/json", "json"),
        ("text/markdown", "markdown"),
        ("TEXT/HTML; charset=utf-8", "html"),
        # A browser: HTML first, anything else at a lower weight.
        ("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", "html"),
        ("text/*", "markdown"),  # the route's first text type
        ("text/*;q=0.5, text/html", "html"),
        ("application/json;q=0.2, text/markdown;q=0.9", "markdown"),
        # The most specific range decides: text/html is refused though text/* is not.
        ("text/html;q=0, text/*", "markdown"),
        ("*/*;q=0.1, application/json;q=0", "markdown"),
        ("garbage", "json"),  # nothing parseable: as if no header was sent
    ],
)
def test_the_preferred_offer_is_chosen(accept: str | None, chosen: str) -> None:
    assert preferred(accept, OFFERS) == chosen


@pytest.mark.parametrize(
    "accept",
    ["image/png", "application/xml, text/csv", "*/*;q=0", "text/html;q=nonsense", "*/*;q=nan"],
)
def test_nothing_acceptable_is_none(accept: str) -> None:
    assert preferred(accept, OFFERS) is None


def test_no_offers_is_none() -> None:
    assert preferred("*/*", {}) is None


@dataclass(frozen=True)
class Fmt:
    media_type: str


def test_a_named_format_wins_and_an_unknown_name_or_accept_is_refused() -> None:
    formats = {name: Fmt(media) for name, media in OFFERS.items()}
    assert chosen_format("html", "application/json", formats) is formats["html"]
    assert chosen_format(None, "text/markdown", formats) is formats["markdown"]
    assert chosen_format(None, None, formats) is formats["json"]
    with pytest.raises(UnknownFormat):
        chosen_format("pdf", None, formats)
    with pytest.raises(NotAcceptable):
        chosen_format(None, "image/png", formats)
