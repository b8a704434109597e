"""The error tree: each domain error's kind, exit code and HTTP status."""

from __future__ import annotations

import pytest

from analytics.datasets.uploads import UnknownDatasetError
from analytics.query.safe_sql import (
    DatabaseBusyError,
    SqlError,
    SqlRefused,
    SqlTimeout,
    SqlTooLarge,
)
from analytics.query.sql_process import SqlUnavailable
from analytics.report.build import UnknownProviderError, UnknownRunError
from api.cli.commands.plan import PlanInputError
from api.rest.errors import (
    RegionUnavailable,
    UnknownScenarioError,
)
from scenarios.catalog.loader import CatalogError, UnknownIdError
from scenarios.datasets.files import WorkloadFileError
from scenarios.errors import (
    TokenbenchError,
)
from scenarios.loader import Problem, ScenarioError
from scenarios.security.egress import EgressDenied
from workers.client.provider_setup import ProviderSetupError
from workers.client.secrets import SecretRefused
from workers.shard.ownership import RedisUnavailable


@pytest.mark.parametrize(
    ("error", "kind", "exit_code", "status"),
    [
        (ScenarioError([Problem("load", "bad")]), "bad_input", 2, 422),
        (CatalogError(["bad"], "c.yaml"), "bad_input", 2, 422),
        (WorkloadFileError("bad", "f.jsonl", 2), "bad_input", 2, 422),
        (PlanInputError("bad"), "bad_input", 2, 422),
        (ProviderSetupError("bad"), "bad_input", 2, 422),
        (UnknownIdError("model", "x", ["y"]), "not_found", 2, 404),
        (UnknownRunError("r"), "not_found", 2, 404),
        (UnknownProviderError("p", ["q"]), "not_found", 2, 404),
        (UnknownDatasetError("ds-1"), "not_found", 2, 404),
        (UnknownScenarioError("sc-1"), "not_found", 2, 404),
        (EgressDenied("no"), "refused", 2, 403),
        (SecretRefused("no"), "refused", 2, 403),
        (RegionUnavailable(["mars"]), "conflict", 2, 409),
        (RedisUnavailable("down"), "unavailable", 1, 503),
        (DatabaseBusyError("busy"), "unavailable", 1, 503),
        (SqlError("bad"), "bad_input", 2, 400),
        (SqlRefused("no"), "refused", 2, 403),
        (SqlTimeout("slow"), "timeout", 2, 408),
        (SqlTooLarge("big"), "bad_input", 2, 413),
        (SqlUnavailable("down"), "unavailable", 1, 503),
    ],
)
def test_domain_errors_carry_their_kind(
    error: TokenbenchError, kind: str, exit_code: int, status: int
) -> None:
    assert (error.kind, error.exit_code, error.http_status) == (kind, exit_code, status)


def test_domain_errors_keep_their_builtin_base() -> None:
    # Existing ``except ValueError`` / ``except LookupError`` clauses still catch them.
    assert isinstance(ScenarioError([]), ValueError)
    assert isinstance(UnknownRunError("r"), LookupError)
    assert isinstance(SqlRefused("no"), SqlError)
    assert isinstance(RedisUnavailable("down"), RuntimeError)
