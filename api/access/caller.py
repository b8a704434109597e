"""The authenticated caller of a request: a token's id, team and role."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

# Objects written before teams existed (and by the embedded `tokenbench run`) belong here.
DEFAULT_TEAM = "default"


class Role(StrEnum):
    """What a token may do; each role may do everything of the ones before it."""

    VIEWER = "viewer"  # reads what its team may see
    SUBMITTER = "submitter"  # also submits, cancels, uploads, schedules: its team's
    ADMIN = "admin"  # everything: tokens, teams, budgets, the audit log, every object

    @property
    def rank(self) -> int:
        """Order of privilege: viewer 0, submitter 1, admin 2."""
        return list(Role).index(self)


@dataclass(frozen=True, slots=True)
class Caller:
    """Who a request comes from. ``token_id`` never holds the token itself."""

    token_id: str
    team: str
    role: Role
    name: str | None = None
    bootstrap: bool = False  # a TOKENBENCH__API__TOKENS token

    @property
    def is_admin(self) -> bool:
        """Admins read and change every team's objects."""
        return self.role is Role.ADMIN

    def has(self, role: Role) -> bool:
        """Whether this caller's role includes ``role``."""
        return self.role.rank >= role.rank


# The owner of the local machine (`tokenbench run`): everything, as team default.
LOCAL_OWNER = Caller("local", DEFAULT_TEAM, Role.ADMIN, "local")
