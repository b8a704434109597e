"""Cron expressions of schedules: parsed into APScheduler's ``CronTrigger``, checked, and
asked which fires fell in a span of time.

The syntax is the crontab one users know, five fields ``minute hour day-of-month month
day-of-week`` (numbers, ``*``, ranges ``a-b``, steps ``/n``, lists ``a,b``; month and
weekday names), or six with a leading ``second`` field. Two places where APScheduler 3
differs from cron are settled here rather than left to surprise a user:

* weekdays: crontab counts 0 (and 7) as Sunday, APScheduler 3 as Monday. The weekday
  field is expanded here and handed over as names (``sun``, ``mon``...), so ``1-5`` is
  Monday to Friday as in crontab;
* a day of month *and* a day of week: crontab fires when either matches, APScheduler when
  both do. Such an expression is refused (give one of the two).

An expression that would fire more often than the minimum interval (once a minute by
default, ``TOKENBENCH__SCHEDULES__MIN_INTERVAL_S``), or never, is refused. Times are
computed in the schedule's time zone (an IANA name, UTC by default), so ``0 9 * * 1-5``
is nine in the morning there, summer time included.
"""

from __future__ import annotations

import datetime as dt
import re
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from apscheduler.triggers.cron import CronTrigger

from scenarios.errors import BadInput
from scenarios.limits import MAX_CRON_CHARS, MAX_ID_CHARS

FIELDS_5 = ("minute", "hour", "day", "month", "day_of_week")
FIELDS_6 = ("second", *FIELDS_5)
# Fires looked at for the shortest gap: a day's worth at once a minute, so every gap of an
# expression whose pattern repeats within that many fires (all the usual ones) is seen.
GAP_FIRES = 1500
# Fires counted at most between two instants (what a catch-up reports as missed).
MAX_COUNTED_FIRES = 10_000

_TOKEN = re.compile(r"^[0-9a-zA-Z*/,\-]+$")
_WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_WEEKDAY_TERM = re.compile(r"^(\*|[0-7]|[a-z]{3})(?:-([0-7]|[a-z]{3}))?(?:/([0-9]+))?$")


class CronError(BadInput, ValueError):
    """A cron expression or time zone that cannot be used; ``field`` names which."""

    def __init__(self, message: str, field: str = "cron") -> None:
        super().__init__(message)
        self.field = field


def _weekday(text: str) -> int:
    if text.isdigit():
        return int(text) % 7  # 7 is Sunday, as 0
    if text not in _WEEKDAYS:
        raise CronError(f"day of week {text!r}: give 0-7 (0 and 7 are Sunday) or sun-sat")
    return _WEEKDAYS.index(text)


def crontab_weekdays(field: str) -> str:
    """A crontab day-of-week field as APScheduler 3 reads it (names, not its numbers):
    ``1-5`` → ``mon,tue,wed,thu,fri``; ``*`` stays ``*``."""
    if field == "*":
        return "*"
    days: set[int] = set()
    for term in field.lower().split(","):
        match = _WEEKDAY_TERM.match(term)
        if match is None:
            raise CronError(f"day of week {term!r}: use numbers or names, ranges, steps, lists")
        start, end, step = match.group(1), match.group(2), match.group(3)
        if start == "*":
            if end is not None:
                raise CronError(f"day of week {term!r}: '*' takes no range")
            first, last = 0, 6
        else:
            first = _weekday(start)
            # A range ends on its own day: 5-7 is Friday to Sunday (7 counts as 7 here).
            last = first if end is None else (7 if end == "7" else _weekday(end))
            if end is None and step is not None:
                last = 6
        if last < first:
            raise CronError(f"day of week {term!r}: a range runs from low to high")
        stride = int(step) if step is not None else 1
        if stride < 1:
            raise CronError(f"day of week {term!r}: a step is at least 1")
        days |= {day % 7 for day in range(first, last + 1, stride)}
    return ",".join(_WEEKDAYS[day] for day in sorted(days))


def zone(name: str) -> ZoneInfo:
    """The IANA time zone ``name`` (CronError at ``timezone`` if unknown)."""
    if len(name) > MAX_ID_CHARS or not name:
        raise CronError("a time zone is an IANA name, e.g. UTC or Europe/Paris", "timezone")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise CronError(f"unknown time zone {name!r}: give an IANA name", "timezone") from None


def parse_cron(expression: str, timezone: str = "UTC") -> CronTrigger:
    """The trigger of a crontab expression in ``timezone`` (CronError naming the problem)."""
    if len(expression) > MAX_CRON_CHARS:
        raise CronError(f"a cron expression has at most {MAX_CRON_CHARS} characters")
    parts = expression.split()
    if len(parts) not in (5, 6):
        raise CronError(
            f"{len(parts)} fields: give 5 (minute hour day-of-month month day-of-week), "
            "or 6 with seconds first"
        )
    for part in parts:
        if not _TOKEN.fullmatch(part):
            raise CronError(f"field {part!r}: only numbers, names, '*', '-', '/' and ',' are read")
    names = FIELDS_5 if len(parts) == 5 else FIELDS_6
    fields = dict(zip(names, parts, strict=True))
    restricted_days = fields["day"] != "*" and fields["day_of_week"] != "*"
    fields["day_of_week"] = crontab_weekdays(fields["day_of_week"])
    tz = zone(timezone)
    try:
        trigger = CronTrigger(timezone=tz, **{k: v.lower() for k, v in fields.items()})
    except ValueError as exc:
        raise CronError(f"{expression!r}: {exc}") from None
    if restricted_days:
        raise CronError(
            "give a day of month or a day of week, not both (crontab would fire on either, "
            "APScheduler on both: easy to misread): set the other to '*'"
        )
    return trigger


def next_fire(trigger: CronTrigger, after: dt.datetime) -> dt.datetime | None:
    """The first fire strictly after ``after`` (None if the expression never fires again)."""
    fire: dt.datetime | None = trigger.get_next_fire_time(
        None, after + dt.timedelta(microseconds=1)
    )
    return fire


def check_interval(trigger: CronTrigger, min_interval_s: float, now: dt.datetime) -> float:
    """The shortest gap (s) between the next fires after ``now``; CronError when it is
    below ``min_interval_s`` or when the expression never fires."""
    first = next_fire(trigger, now)
    if first is None:
        raise CronError("this expression never fires")
    shortest = float("inf")
    previous = first
    for _ in range(GAP_FIRES):
        fire = next_fire(trigger, previous)
        if fire is None:
            break
        shortest = min(shortest, (fire - previous).total_seconds())
        if shortest < min_interval_s:
            raise CronError(
                f"fires {shortest:g} s apart (e.g. at {previous.isoformat()} and "
                f"{fire.isoformat()}): at most once every {min_interval_s:g} s"
            )
        previous = fire
    return shortest


def fires_between(
    trigger: CronTrigger, after: dt.datetime, until: dt.datetime
) -> tuple[dt.datetime | None, int]:
    """The latest fire in (``after``, ``until``] and how many fell there (counted up to
    :data:`MAX_COUNTED_FIRES`; past that, the last one counted stands for the latest)."""
    latest = None
    count = 0
    fire = next_fire(trigger, after)
    while fire is not None and fire <= until and count < MAX_COUNTED_FIRES:
        latest = fire
        count += 1
        fire = next_fire(trigger, fire)
    return latest, count
