"""api/schedules/cron.py: crontab syntax as crontab means it (Sunday is 0 and 7; a day of
month and a day of week together are refused), the minimum interval, time zones, and
which fires fell between two instants."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest

from api.schedules.cron import (
    CronError,
    check_interval,
    crontab_weekdays,
    fires_between,
    next_fire,
    parse_cron,
    zone,
)

MONDAY = dt.datetime(2025, 1, 6, 8, 0, tzinfo=dt.UTC)  # 08:00 UTC on a Monday


@pytest.mark.parametrize(
    ("field", "apscheduler"),
    [
        ("*", "*"),
        ("0", "sun"),
        ("7", "sun"),
        ("1-5", "mon,tue,wed,thu,fri"),
        ("5-7", "sun,fri,sat"),
        ("*/2", "sun,tue,thu,sat"),
        ("1/2", "mon,wed,fri"),
        ("sat,SUN", "sun,sat"),
        ("mon-wed", "mon,tue,wed"),
    ],
)
def test_weekdays_are_crontabs(field: str, apscheduler: str) -> None:
    assert crontab_weekdays(field) == apscheduler


@pytest.mark.parametrize("field", ["8", "fri-mon", "5-1", "L", "1#2", "*-2", "mon/0", "funday"])
def test_weekdays_that_are_not_crontab_are_refused(field: str) -> None:
    with pytest.raises(CronError, match="day of week"):
        crontab_weekdays(field)


def test_weekday_expressions_fire_on_the_days_crontab_names() -> None:
    weekdays = parse_cron("0 9 * * 1-5")
    fires = [MONDAY]
    for _ in range(5):
        fire = next_fire(weekdays, fires[-1])
        assert fire is not None
        fires.append(fire)
    assert [f.strftime("%a %H:%M") for f in fires[1:]] == [
        "Mon 09:00", "Tue 09:00", "Wed 09:00", "Thu 09:00", "Fri 09:00",
    ]  # fmt: skip
    sunday = next_fire(parse_cron("0 9 * * 0"), MONDAY)
    assert sunday is not None and sunday.strftime("%a %d") == "Sun 12"


def test_times_are_the_schedules_time_zone() -> None:
    paris = parse_cron("0 9 * * *", "Europe/Paris")
    winter = next_fire(paris, MONDAY)
    summer = next_fire(paris, dt.datetime(2025, 7, 7, 6, 0, tzinfo=dt.UTC))
    assert winter is not None and summer is not None
    assert winter.astimezone(dt.UTC).hour == 8 and summer.astimezone(dt.UTC).hour == 7
    assert zone("UTC") == ZoneInfo("UTC")
    with pytest.raises(CronError) as caught:
        parse_cron("0 9 * * *", "Mars/Olympus")
    assert caught.value.field == "timezone"


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("* * * *", "4 fields"),
        ("* * * * * * *", "7 fields"),
        ("61 * * * *", "61"),
        ("0 9 1 * 1", "not both"),
        ("0 9 ? * *", "only numbers"),
        ("0 9 * * * ;", "only numbers"),
        ("x" * 300, "at most"),
    ],
)
def test_unreadable_expressions_are_refused_naming_the_problem(
    expression: str, message: str
) -> None:
    with pytest.raises(CronError, match=message) as caught:
        parse_cron(expression)
    assert caught.value.field == "cron"


def test_the_minimum_interval_is_enforced() -> None:
    assert check_interval(parse_cron("* * * * *"), 60, MONDAY) == 60
    assert check_interval(parse_cron("0 9 * * 1-5"), 60, MONDAY) == 86_400
    with pytest.raises(CronError, match="2 s apart"):
        check_interval(parse_cron("*/2 * * * * *"), 60, MONDAY)
    assert check_interval(parse_cron("*/2 * * * * *"), 1, MONDAY) == 2  # the tests' setting
    # Irregular gaps count by their shortest: 23:59 and 00:00 are a minute apart.
    with pytest.raises(CronError, match="60 s apart"):
        check_interval(parse_cron("0,59 0,23 * * *"), 120, MONDAY)
    with pytest.raises(CronError, match="never fires"):
        check_interval(parse_cron("0 0 31 2 *"), 60, MONDAY)


def test_fires_between_two_instants() -> None:
    every_minute = parse_cron("* * * * *")
    latest, count = fires_between(
        every_minute, MONDAY, MONDAY + dt.timedelta(minutes=10, seconds=5)
    )
    assert latest == MONDAY + dt.timedelta(minutes=10) and count == 10
    # Strictly after the anchor: the fire at the anchor itself was already handled.
    assert fires_between(every_minute, MONDAY, MONDAY) == (None, 0)
    assert next_fire(every_minute, MONDAY) == MONDAY + dt.timedelta(minutes=1)
