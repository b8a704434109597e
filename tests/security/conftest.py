"""A real control plane and worker as a shared service would run them, attacked over REST.

The worker (region ``sec``) holds canary secrets in its environment, as a regional
fleet holds the organisation's provider keys; a :class:`Catcher` on loopback plays the
attacker's server. Tests submit hostile scenarios as an authenticated but untrusted
user would, then assert that no canary, file content or forbidden request reached the
catcher, and that the control plane is still healthy and writable
(:meth:`HostileStack.assert_healthy`).

Loopback egress is allowed on both sides so that the catcher is reachable at all: the
rules under test are the ones *beyond* the egress allow-list (secret bindings, paths,
bounds, metadata ranges, pinned addresses).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.local.redis_server import RedisServer
from tests.conftest import API_TOKEN, Proc, start_control_plane, start_worker, wait_for_run
from tests.fakes.catcher import Catcher

REGION = "sec"

# Secrets a regional worker holds. None of these values may ever reach a catcher.
CANARIES = {
    "OPENAI_API_KEY": "sk-canary-openai-7f3a9c",
    "GROQ_API_KEY": "gsk-canary-groq-51be02",
    "AWS_ACCESS_KEY_ID": "AKIACANARY0KEYID0042",
    "AWS_SECRET_ACCESS_KEY": "canary-aws-secret-9d8e7f",
    "REPLICATE_API_TOKEN": "r8-canary-replicate-3c4d",
    "CANARY_SECRET": "canary-unbound-secret-0a1b2c",
    # Bound on the worker to the loopback test endpoint (a legitimate binding).
    "BOUND_TEST_KEY": "sk-canary-bound-test-66aa",
    # Bound to the loopback host only as a bare name (so over https, port 443), and to
    # another port: a plain-http server on a free port must not get them.
    "HOST_ONLY_TEST_KEY": "sk-canary-host-only-4e1d",
    "OTHER_PORT_TEST_KEY": "sk-canary-other-port-93c2",
}
# The worker's bindings: loopback servers are bound explicitly, scheme and port.
SECRET_BINDINGS = {
    "BOUND_TEST_KEY": ["http://127.0.0.1:*"],
    "HOST_ONLY_TEST_KEY": ["127.0.0.1"],
    "OTHER_PORT_TEST_KEY": ["http://127.0.0.1:1"],
}


@dataclass
class HostileStack:
    """The service under attack."""

    client: httpx.Client
    base: str
    redis_url: str
    worker: Proc
    plane: Proc
    db: Path

    def canaries_in(self, data: bytes) -> list[str]:
        """Names of the canary secrets (and service secrets) found in ``data``."""
        found = [name for name, value in CANARIES.items() if value.encode() in data]
        if API_TOKEN.encode() in data:
            found.append("TOKENBENCH__API__TOKENS")
        if self.redis_url.encode() in data:
            found.append("TOKENBENCH__REDIS__URL")
        return found

    def assert_healthy(self) -> None:
        """The control plane answers, is ready (Redis and DuckDB writable), and still
        accepts a valid scenario."""
        assert self.plane.process.poll() is None, self.plane.text()[-4000:]
        ready = self.client.get("/readyz")
        assert ready.status_code == 200, ready.text
        assert ready.json()["duckdb"] is True, ready.text
        stored = self.client.post("/v1/scenarios", json=scenario_with(simulated()))
        assert stored.status_code == 201, stored.text

    def wait_for_run(self, run_id: str, timeout_s: float = 90) -> dict[str, Any]:
        """The run's view once it is no longer running."""
        return wait_for_run(self.client, run_id, timeout_s)


def simulated(name: str = "sim") -> dict[str, Any]:
    """A harmless provider: the worker's own simulated endpoint."""
    return {"name": name, "kind": "simulated", "simulate": {"ttft_ms": 5, "itl_ms": 1}}


def scenario_with(*providers: dict[str, Any], requests: int = 2, **extra: Any) -> dict[str, Any]:
    """A small valid scenario in the hostile region with ``providers``; ``extra``
    replaces top-level keys (e.g. ``workload=...``)."""
    data: dict[str, Any] = {
        "name": "hostile",
        "providers": list(providers),
        "workload": {
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": 4},
                    "output_tokens": {"dist": "fixed", "value": 2},
                }
            ]
        },
        "load": {"concurrency": [1], "requests_per_level": requests},
        "regions": [REGION],
    }
    data.update(extra)
    return data


@pytest.fixture
def catcher() -> Iterator[Catcher]:
    """The attacker's server on loopback, fresh for each test."""
    server = Catcher().start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def hostile_stack(
    redis_server: RedisServer,
    worker_env: dict[str, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[HostileStack]:
    """A control plane and a worker holding the canary secrets, for the whole session."""
    tmp = tmp_path_factory.mktemp("hostile")
    worker_env_sec = {
        **worker_env,
        **CANARIES,
        "TOKENBENCH__WORKER__SECRET_HOSTS": json.dumps(SECRET_BINDINGS),
    }
    worker = start_worker(REGION, worker_env_sec, tmp / "worker-sec.log", redis_server.url)
    plane, base = start_control_plane(worker_env, tmp / "api.duckdb", tmp / "api.log")
    with httpx.Client(
        base_url=base, headers={"authorization": f"Bearer {API_TOKEN}"}, timeout=30
    ) as client:
        yield HostileStack(client, base, redis_server.url, worker, plane, tmp / "api.duckdb")
    plane.stop()
    worker.stop(3)
