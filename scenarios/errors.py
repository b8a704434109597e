"""The one error tree: every error that reaches a user is one of seven kinds.

Each kind carries its CLI exit code and HTTP status, so the command line
(``api.cli.errors.exit_for``) and the REST API (``api.rest.errors``) map an error once, by
its kind, instead of naming every class. Errors of a package subclass the kind that
fits (and keep their old builtin base, e.g. ``ValueError``, for existing ``except``
clauses); a class may refine its HTTP status (an invalid SQL query is a 400, not a 422).

=============  ====  ======  ==================================================
kind           exit  HTTP    meaning
=============  ====  ======  ==================================================
bad_input      2     422     the input is wrong: fix it and retry
not_found      2     404     no such run, scenario, dataset, provider, catalog id
refused        2     403     valid, but not allowed (SQL access, egress policy);
                             429 for a used-up quota or rate (QuotaExceeded)
conflict       2     409     not possible in the current state (no live worker)
unavailable    1     503     a dependency is down or busy: retry later
timeout        1     408     it took longer than allowed
internal       1     500     a bug: logged with a correlation id
=============  ====  ======  ==================================================

Exit codes follow the CLI's convention: 2 is the user's input, 1 is operational.
Scenarios is the shared base, so every package may import this module.
"""

from __future__ import annotations

from typing import ClassVar


class TokenbenchError(Exception):
    """Base of the tree; raise one of the seven kinds, not this."""

    kind: ClassVar[str] = "internal"
    exit_code: ClassVar[int] = 1
    http_status: ClassVar[int] = 500

    def public_detail(self) -> object:
        """What the REST body's ``detail`` says; the message unless a class knows better."""
        return str(self)

    def public_fields(self) -> dict[str, object]:
        """Fields a class adds to the REST body beside ``detail`` and ``error``."""
        return {}


class BadInput(TokenbenchError):
    """The input is wrong (scenario, options, file, query): fix it and retry."""

    kind = "bad_input"
    exit_code = 2
    http_status = 422


class NotFound(TokenbenchError):
    """The named thing (run, scenario, dataset, provider, catalog id) does not exist."""

    kind = "not_found"
    exit_code = 2
    http_status = 404


class Refused(TokenbenchError):
    """Valid, but not allowed: an access user SQL may not make, a host egress forbids."""

    kind = "refused"
    exit_code = 2
    http_status = 403


class QuotaExceeded(Refused):
    """A team's quota or a token's request rate is used up: HTTP 429. ``quota`` names
    it and ``setting`` where its figure comes from (an environment variable or the
    team's own setting); ``retry_after_s``, when waiting is enough, the ``Retry-After``."""

    http_status = 429

    def __init__(
        self, message: str, quota: str, setting: str, retry_after_s: int | None = None
    ) -> None:
        super().__init__(message)
        self.quota = quota
        self.setting = setting
        self.retry_after_s = retry_after_s

    def public_fields(self) -> dict[str, object]:
        """The quota, its setting and, when waiting is enough, when to retry."""
        fields: dict[str, object] = {"quota": self.quota, "setting": self.setting}
        if self.retry_after_s is not None:
            fields["retry_after_s"] = self.retry_after_s
        return fields


class Conflict(TokenbenchError):
    """Not possible in the current state, e.g. a region without a live worker."""

    kind = "conflict"
    exit_code = 2
    http_status = 409


class Unavailable(TokenbenchError):
    """A dependency (Redis, the database, a query process) is down or busy."""

    kind = "unavailable"
    exit_code = 1
    http_status = 503


class Timeout(TokenbenchError):
    """The work took longer than it was allowed."""

    kind = "timeout"
    exit_code = 1
    http_status = 408


class Internal(TokenbenchError):
    """A bug or an unexpected state: nothing the user can fix."""

    kind = "internal"
    exit_code = 1
    http_status = 500


KINDS: tuple[type[TokenbenchError], ...] = (
    BadInput,
    NotFound,
    Refused,
    Conflict,
    Unavailable,
    Timeout,
    Internal,
)
