"""api/access/inputs.py: team names, expiry durations and times, checked before anything
is minted or set."""

from __future__ import annotations

import datetime as dt

import pytest

from api.access.inputs import MAX_EXPIRY, check_team, expiry, parse_duration
from scenarios.errors import BadInput

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


@pytest.mark.parametrize("name", ["a", "default", "ml-infra", "team_2", "0", "a" * 63])
def test_valid_team_names(name: str) -> None:
    assert check_team(name) == name


@pytest.mark.parametrize(
    "name", ["", "A", "Ml", "-a", "_a", "a b", "a/b", "a.b", "a" * 64, "é", "a\n", "../x"]
)
def test_invalid_team_names(name: str) -> None:
    with pytest.raises(BadInput, match="lowercase letters"):
        check_team(name)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("45s", 45), ("30m", 1800), ("12h", 43_200), ("90d", 90 * 86_400), ("2w", 14 * 86_400)],
)
def test_durations(text: str, seconds: int) -> None:
    assert parse_duration(text) == dt.timedelta(seconds=seconds)


def test_the_longest_duration_is_ten_years() -> None:
    assert parse_duration("3650d") == MAX_EXPIRY
    with pytest.raises(BadInput, match="at most 3650d"):
        parse_duration("3651d")
    with pytest.raises(BadInput, match="at most"):
        parse_duration("9999999999w")


@pytest.mark.parametrize("text", ["", "d", "0d", "-1d", "1.5d", "90", "90 d", "90days", "1y", "1D"])
def test_unreadable_durations(text: str) -> None:
    with pytest.raises(BadInput, match="whole number and a unit"):
        parse_duration(text)


def test_expiry_from_a_duration_a_time_or_neither() -> None:
    assert expiry(None, None, NOW) is None
    assert expiry("1d", None, NOW) == NOW + dt.timedelta(days=1)
    at = NOW + dt.timedelta(hours=1)
    assert expiry(None, at, NOW) == at
    # A naive time is UTC.
    assert expiry(None, at.replace(tzinfo=None), NOW) == at


@pytest.mark.parametrize(
    ("expires_in", "expires_at", "message"),
    [
        ("1d", NOW + dt.timedelta(days=1), "not both"),
        (None, NOW, "not in the future"),
        (None, NOW - dt.timedelta(seconds=1), "not in the future"),
        (None, NOW + MAX_EXPIRY + dt.timedelta(seconds=1), "at most 3650 days"),
    ],
)
def test_refused_expiries(
    expires_in: str | None, expires_at: dt.datetime | None, message: str
) -> None:
    with pytest.raises(BadInput, match=message):
        expiry(expires_in, expires_at, NOW)
