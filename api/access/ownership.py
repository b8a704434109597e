"""Who owns an object and who may see or change it.

Every scenario, run, dataset, schedule and shadow session has a row in
``object_owners``: its team and the token that created it (none: team ``default``, as
for everything written before teams existed). The rules (docs/teams.md):

- **read**: an admin reads everything; anyone reads their own team's objects; another
  team's objects when they are visible org-wide: a run by its own ``visibility`` if it
  has one, else by its team's setting (``teams.visibility``, ``org`` by default).
- **change** (cancel, delete, pause, stop): its own team (submitter or admin role) or
  an admin. Another team gets **404** for an object it may not read and **403** for one
  it may read, so a private object's existence is not revealed.

:func:`visible_runs_sql` is the same read rule as SQL, for list queries and for the
database copy that user SQL reads (analytics/query/snapshot.py).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from enum import StrEnum

import duckdb

from analytics.sql.results import first_row
from api.access.caller import DEFAULT_TEAM, Caller, Role
from scenarios.errors import NotFound as NotFoundKind
from scenarios.errors import Refused


class Kind(StrEnum):
    """The kinds of owned objects."""

    SCENARIO = "scenario"
    RUN = "run"
    DATASET = "dataset"
    SCHEDULE = "schedule"
    SESSION = "session"


class Visibility(StrEnum):
    """Who reads a team's results."""

    ORG = "org"  # every token of the organisation
    TEAM = "team"  # the team's tokens and admins


class NotFound(NotFoundKind, LookupError):
    """The object does not exist, or the caller may not know that it does (404)."""

    def __init__(self, kind: Kind, object_id: str) -> None:
        super().__init__(f"no {kind.value} {object_id}")


class Forbidden(Refused):
    """The caller may see the object but not do this to it (403)."""


@dataclass(frozen=True, slots=True)
class Owner:
    """An object's owner and its own visibility override."""

    team: str
    token_id: str | None
    visibility: Visibility | None


UNOWNED = Owner(DEFAULT_TEAM, None, None)

# The visibility of a team without a ``teams`` row: TOKENBENCH__TEAMS__VISIBILITY, set
# once by the control plane when it starts (set_default_visibility); org until then.
_default_visibility = Visibility.ORG


def set_default_visibility(visibility: Visibility) -> None:
    """Use ``visibility`` for teams that have no setting of their own (the service-wide
    default, ``TOKENBENCH__TEAMS__VISIBILITY``)."""
    global _default_visibility  # noqa: PLW0603 - one setting of the process, set at start
    _default_visibility = visibility


def record_owner(
    con: duckdb.DuckDBPyConnection,
    kind: Kind,
    object_id: str,
    caller: Caller,
    visibility: Visibility | None = None,
) -> None:
    """Record that ``caller`` created ``object_id`` (a second record of the same object,
    e.g. a dataset uploaded again by content, keeps the first owner)."""
    con.execute(
        "INSERT INTO object_owners VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        [
            kind.value,
            object_id,
            caller.team,
            caller.token_id,
            None if visibility is None else visibility.value,
            dt.datetime.now(dt.UTC),
        ],
    )


def _kinds(kind: str) -> list[str]:
    """The owner rows a kind is looked up in: runs and shadow sessions share one id space
    (a session is also a row of ``runs``), so each is found under either kind."""
    return [Kind.RUN.value, Kind.SESSION.value] if kind in (Kind.RUN, Kind.SESSION) else [kind]


def owner_of(con: duckdb.DuckDBPyConnection, kind: Kind, object_id: str) -> Owner:
    """The object's owner (``UNOWNED``, team default, when it has no row)."""
    kinds = _kinds(kind)
    row = first_row(
        con.execute(
            "SELECT team, token_id, visibility FROM object_owners "  # noqa: S608 - placeholders only
            f"WHERE kind IN ({', '.join('?' for _ in kinds)}) AND object_id = ?",
            [*kinds, object_id],
        )
    )
    if row is None:
        return UNOWNED
    return Owner(str(row[0]), row[1], None if row[2] is None else Visibility(str(row[2])))


def team_visibility(con: duckdb.DuckDBPyConnection, team: str) -> Visibility:
    """A team's setting (org when it has none)."""
    row = first_row(con.execute("SELECT visibility FROM teams WHERE team = ?", [team]))
    return Visibility(str(row[0])) if row else _default_visibility


def may_read(con: duckdb.DuckDBPyConnection, caller: Caller, owner: Owner) -> bool:
    """The read rule for one object."""
    if caller.is_admin or owner.team == caller.team:
        return True
    visibility = owner.visibility or team_visibility(con, owner.team)
    return visibility is Visibility.ORG


def check_read(con: duckdb.DuckDBPyConnection, caller: Caller, kind: Kind, object_id: str) -> Owner:
    """The owner of an object the caller may read; NotFound (404) otherwise."""
    owner = owner_of(con, kind, object_id)
    if not may_read(con, caller, owner) and not (
        kind is Kind.DATASET and uses_dataset(con, caller.team, object_id)
    ):
        raise NotFound(kind, object_id)
    return owner


def readable(con: duckdb.DuckDBPyConnection, caller: Caller, kind: Kind, object_id: str) -> bool:
    """Whether ``caller`` may read the object (an unknown id: by the unowned rule)."""
    try:
        check_read(con, caller, kind, object_id)
    except NotFound:
        return False
    return True


def record_dataset_user(
    con: duckdb.DuckDBPyConnection, dataset_id: str, caller: Caller, origin: str | None
) -> bool:
    """Record that ``caller``'s team uploaded the bytes of ``dataset_id``; True when the
    team had not before. Datasets are stored by content, so a second team uploading the
    same bytes gets the same id: this row lets it read and use the dataset, with its own
    file name and time, whoever owns the stored object (docs/teams.md)."""
    row = first_row(
        con.execute(
            "INSERT INTO dataset_users VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING 1",
            [dataset_id, caller.team, caller.token_id, origin, dt.datetime.now(dt.UTC)],
        )
    )
    return row is not None


def dataset_use(
    con: duckdb.DuckDBPyConnection, team: str, dataset_id: str
) -> tuple[str | None, dt.datetime] | None:
    """The file name and time ``team`` uploaded ``dataset_id`` with, or None."""
    row = first_row(
        con.execute(
            "SELECT origin, created_at FROM dataset_users WHERE dataset_id = ? AND team = ?",
            [dataset_id, team],
        )
    )
    return None if row is None else (row[0], row[1])


def release_dataset(con: duckdb.DuckDBPyConnection, dataset_id: str, team: str | None) -> bool:
    """Remove ``team``'s use of ``dataset_id`` (None: every team's, an admin's delete);
    True when no team uses it any more (its content may go). While other teams keep it,
    ownership passes to the one that uploaded it first, so the object stays theirs."""
    if team is None:
        con.execute("DELETE FROM dataset_users WHERE dataset_id = ?", [dataset_id])
    else:
        con.execute(
            "DELETE FROM dataset_users WHERE dataset_id = ? AND team = ?", [dataset_id, team]
        )
    heir = first_row(
        con.execute(
            "SELECT team, token_id FROM dataset_users WHERE dataset_id = ? "
            "ORDER BY created_at, team LIMIT 1",
            [dataset_id],
        )
    )
    if heir is None:
        con.execute(
            "DELETE FROM object_owners WHERE kind = ? AND object_id = ?",
            [Kind.DATASET.value, dataset_id],
        )
        return True
    con.execute(
        "UPDATE object_owners SET team = ?, token_id = ? WHERE kind = ? AND object_id = ?",
        [heir[0], heir[1], Kind.DATASET.value, dataset_id],
    )
    return False


def uses_dataset(con: duckdb.DuckDBPyConnection, team: str, dataset_id: str) -> bool:
    """Whether ``team`` uploaded the bytes of ``dataset_id`` itself."""
    return dataset_use(con, team, dataset_id) is not None


def check_change(
    con: duckdb.DuckDBPyConnection, caller: Caller, kind: Kind, object_id: str
) -> Owner:
    """The owner of an object the caller may change: 404 if it may not even read it,
    403 if it reads it but it is another team's (or the caller is a viewer)."""
    owner = check_read(con, caller, kind, object_id)
    if not caller.has(Role.SUBMITTER):
        raise Forbidden(f"a {caller.role.value} token may not change a {kind.value}")
    if not caller.is_admin and owner.team != caller.team:
        raise Forbidden(f"this {kind.value} belongs to team {owner.team}")
    return owner


def visible_runs_sql(caller: Caller, run_id: str = "run_id") -> tuple[str, list[object]]:
    """A SQL condition on the column ``run_id`` (a trusted expression) that holds for the
    runs (and sessions) ``caller`` may read, and its parameters."""
    if caller.is_admin:
        return "TRUE", []
    return visible_sql("run", caller, run_id)


def visible_sql(kind: str, caller: Caller, column: str) -> tuple[str, list[object]]:
    """A SQL condition that holds for the objects of ``kind`` (id in ``column``, a
    trusted expression) that ``caller`` may read; runs and sessions share the rule."""
    if caller.is_admin:
        return "TRUE", []
    kinds = _kinds(kind)
    condition = (
        f"(SELECT coalesce(o.team, '{DEFAULT_TEAM}') = ? OR coalesce(o.visibility, "  # noqa: S608
        "(SELECT t.visibility FROM teams AS t WHERE t.team = coalesce(o.team, "
        f"'{DEFAULT_TEAM}')), ?) = 'org' FROM (SELECT 1) AS one LEFT JOIN "
        f"object_owners AS o ON o.kind IN ({', '.join('?' for _ in kinds)}) "
        f"AND o.object_id = {column})"
    )
    params: list[object] = [caller.team, _default_visibility.value, *kinds]
    if kind == Kind.DATASET:
        # A team that uploaded the same bytes reads the dataset too (record_dataset_user).
        condition = (
            f"({condition} OR EXISTS (SELECT 1 FROM dataset_users AS u "  # noqa: S608
            f"WHERE u.dataset_id = {column} AND u.team = ?))"
        )
        params.append(caller.team)
    return condition, params


def named(
    condition: tuple[str, list[object]], prefix: str = "visible"
) -> tuple[str, dict[str, object]]:
    """A condition of :func:`visible_sql` with named parameters (``$visible_0`` ...), for
    queries written with named ones (DuckDB does not mix the two styles)."""
    text, params = condition
    pieces = text.split("?")
    out = pieces[0]
    for index, piece in enumerate(pieces[1:]):
        out += f"${prefix}_{index}" + piece
    return out, {f"{prefix}_{index}": value for index, value in enumerate(params)}
