"""What an admin types about tokens and teams, checked in one place: team names, token
ids, token names and expiry durations (``90d``, ``12h``). REST bodies and paths carry the
same patterns (so the OpenAPI document shows them), the command line sends what it is
given and reads the control plane's 422.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Final

from scenarios.errors import BadInput

# A bounded slug: it is a path segment, a column value and a word in messages.
TEAM_PATTERN: Final = r"^[a-z0-9][a-z0-9_-]{0,62}$"
MAX_TEAM_CHARS: Final = 63
# A minted token's id, or a bootstrap (TOKENBENCH__API__TOKENS) token's.
TOKEN_ID_PATTERN: Final = r"^(tok|boot)-[0-9a-f]{12}$"
# A label: printable, no control characters (it is shown in tables and the audit log).
TOKEN_NAME_PATTERN: Final = r"^[^\x00-\x1f\x7f]{1,128}$"
MAX_TOKEN_NAME_CHARS: Final = 128
# An audit action: ``token.mint``, ``run.submit``, ``sql.query``.
ACTION_PATTERN: Final = r"^[a-z][a-z0-9_.-]{0,63}$"
# ``90d``: a whole number and a unit (seconds, minutes, hours, days, weeks).
DURATION_PATTERN: Final = r"^[1-9][0-9]{0,9}[smhdw]$"
MAX_DURATION_CHARS: Final = 11
# Ten years: a token that should never expire is minted without an expiry instead.
MAX_EXPIRY: Final = dt.timedelta(days=3650)
# Teams an admin may create by setting them (a token's team is bounded by max_tokens).
MAX_TEAMS: Final = 10_000
# Entries one GET /v1/audit answers; tokens one GET /v1/tokens answers.
MAX_AUDIT_ROWS: Final = 10_000
MAX_TOKEN_ROWS: Final = 10_000

_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400}
_TEAM = re.compile(TEAM_PATTERN)
_DURATION = re.compile(DURATION_PATTERN)


def check_team(name: str) -> str:
    """``name`` if it is a valid team name; BadInput naming the rule otherwise."""
    if not _TEAM.fullmatch(name):
        raise BadInput(
            f"team {name[:80]!r}: 1 to {MAX_TEAM_CHARS} lowercase letters, digits, '_' or "
            "'-', starting with a letter or digit"
        )
    return name


def parse_duration(text: str) -> dt.timedelta:
    """``90d``, ``12h``, ``30m``, ``45s``, ``2w`` as a duration of at most
    :data:`MAX_EXPIRY`; BadInput otherwise."""
    found = _DURATION.fullmatch(text.strip())
    if found is None:
        raise BadInput(
            f"expiry {text[:40]!r}: a whole number and a unit, s m h d or w (e.g. 90d, 12h)"
        )
    seconds = int(text.strip()[:-1]) * _UNIT_SECONDS[text.strip()[-1]]
    if seconds > MAX_EXPIRY.total_seconds():
        raise BadInput(f"expiry {text!r}: at most {MAX_EXPIRY.days}d")
    return dt.timedelta(seconds=seconds)


def expiry(
    expires_in: str | None, expires_at: dt.datetime | None, now: dt.datetime
) -> dt.datetime | None:
    """When a token minted at ``now`` expires: in ``expires_in``, or at ``expires_at``
    (in the future, within :data:`MAX_EXPIRY`), or never when neither is given."""
    if expires_in is not None and expires_at is not None:
        raise BadInput("give expires_in or expires_at, not both")
    if expires_in is not None:
        return now + parse_duration(expires_in)
    if expires_at is None:
        return None
    if expires_at.tzinfo is None:  # a naive time is read as UTC, as every stored time is
        expires_at = expires_at.replace(tzinfo=dt.UTC)
    if expires_at <= now:
        raise BadInput(f"expires_at {expires_at.isoformat()} is not in the future")
    if expires_at - now > MAX_EXPIRY:
        raise BadInput(f"expires_at: at most {MAX_EXPIRY.days} days from now")
    return expires_at
