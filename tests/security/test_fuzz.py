"""Property-based fuzzing of the REST API from its own OpenAPI schema (schemathesis).

The schema is read from the running control plane (``/openapi.json``), so the fuzzer
sees what clients see: request bodies that reference the scenario and gateway JSON
Schemas, with every bound of scenarios/limits.py as a ``maximum``/``maxItems``/
``maxLength``. Every operation gets a bounded number of generated requests (valid and
invalid ones) and each must be answered without a 5xx, within a per-request timeout
(a hang fails the test), by a control plane that stays healthy and writable.

Nothing is excluded: runs and shadow sessions the fuzzer manages to create are
cancelled or stopped at once, and generated scenarios never target the region that has
a live worker (``sec``), so no generated request starts real load. Within the bounds,
no valid scenario is large enough to hurt the control plane, which is the point.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import schemathesis
from celery import Celery
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error

from api.rest.app import create_app
from scenarios.settings import RedisSettings, Settings
from tests.conftest import API_TOKEN
from tests.security.conftest import REGION, HostileStack

pytestmark = pytest.mark.integration

# Generated requests per operation: enough to reach the bounds and the odd shapes, few
# enough that the whole fuzz stays around a minute on a loaded 2-core machine.
MAX_EXAMPLES = 25  # per operation, valid and invalid requests together
# A request that takes longer than this is a hang.
REQUEST_TIMEOUT_S = 60.0
# Generated regions are renamed away from the one region with a live worker.
FUZZ_REGION = "fuzz"


def _openapi() -> dict[str, Any]:
    """The control plane's OpenAPI document, built by the same code that serves it (no
    server is needed at collection time; the test below checks the served one matches)."""
    # The Celery client is only used once the app serves; a bare one is enough here.
    celery = Celery("openapi", set_as_current=False)
    return create_app(Settings(redis=RedisSettings(url="redis://unused")), celery).openapi()


# Dataset uploads are raw bytes (JSONL, Parquet, Arrow): send generated binaries as they are.
schemathesis.serializer.alias(
    [
        "application/jsonl",
        "application/x-ndjson",
        "application/vnd.apache.parquet",
        "application/vnd.apache.arrow.file",
        "application/vnd.apache.arrow.stream",
    ],
    "application/octet-stream",
)
schema = schemathesis.openapi.from_dict(_openapi())


def _away_from_workers(body: Any) -> None:
    """Point any regions a generated run body names away from the live worker's region."""
    if not isinstance(body, dict):
        return
    for holder in (body.get("scenario"), body.get("overrides"), body.get("config")):
        if isinstance(holder, dict) and isinstance(holder.get("regions"), list):
            holder["regions"] = [FUZZ_REGION if r == REGION else r for r in holder["regions"]]


def _clean_up(stack: HostileStack, path: str, response: Any) -> None:
    """Cancel a run or stop a session the fuzzer created, so nothing keeps running."""
    if response.status_code != 201:
        return
    created = response.json()
    if path == "/v1/runs":
        stack.client.post(f"/v1/runs/{created['id']}/cancel")
    elif path == "/v1/shadow-sessions":
        stack.client.post(f"/v1/shadow-sessions/{created['id']}/stop", params={"drain_s": 0})


# One ordinary pytest item per operation (not schemathesis' own parametrisation, whose
# items all share one node id): pytest-xdist keys reports by node id, so under the
# parallel suite all but one operation would silently go unreported.
# Valid and invalid requests alike (schemathesis' own default), each operation its share.
OPERATIONS = [result.ok() for result in schema.get_all_operations()]  # type: ignore[union-attr]


@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda operation: operation.label)
def test_no_server_error_and_no_hang(operation: Any, hostile_stack: HostileStack) -> None:
    """Every generated request gets a non-5xx answer within the timeout."""

    valid = operation.as_strategy(GenerationMode.POSITIVE)
    invalid = operation.as_strategy(GenerationMode.NEGATIVE)

    @given(case=st.one_of(valid, invalid))
    @settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.filter_too_much,
            HealthCheck.data_too_large,
        ],
    )
    def one_request(case: Any) -> None:
        _away_from_workers(case.body)
        response = case.call(
            base_url=hostile_stack.base,
            headers={"authorization": f"Bearer {API_TOKEN}"},
            timeout=REQUEST_TIMEOUT_S,
        )
        _clean_up(hostile_stack, case.path, response)
        case.validate_response(response, checks=[not_a_server_error])

    one_request()


def test_served_schema_is_the_fuzzed_one(hostile_stack: HostileStack) -> None:
    """What the running control plane serves is what the fuzzer generated from."""
    served = httpx.get(f"{hostile_stack.base}/openapi.json", timeout=10).json()
    assert served == _openapi()


def test_still_healthy_after_the_fuzz(hostile_stack: HostileStack) -> None:
    """After the fuzz (this module runs it first), the service is ready and writable."""
    hostile_stack.assert_healthy()
    ready = httpx.get(f"{hostile_stack.base}/readyz", timeout=10).json()
    assert ready["ready"] is True, ready
