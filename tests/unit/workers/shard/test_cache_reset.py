"""Where a shard sends its cache reset (workers/shard/cache_reset.py); that it is sent and
recorded end to end is tests/integration/test_prefix_cache.py."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter

from scenarios.providers.kinds import Provider
from workers.shard.cache_reset import reset_target

PROVIDER: TypeAdapter[Any] = TypeAdapter(Provider)


def test_a_simulated_provider_resets_the_endpoint_its_worker_started() -> None:
    simulated = PROVIDER.validate_python({"name": "s", "kind": "simulated", "cache_reset": "vllm"})
    url, base = reset_target(simulated, "http://127.0.0.1:4100/v1")
    assert (url, base) == ("http://127.0.0.1:4100/reset_prefix_cache", "http://127.0.0.1:4100/v1")
    with pytest.raises(ValueError, match="no simulated endpoint"):
        reset_target(simulated, None)


def test_a_server_resets_on_its_own_origin() -> None:
    provider = PROVIDER.validate_python(
        {"name": "v", "kind": "openai", "model": "m", "base_url": "http://10.1.2.3:30000/v1",
         "cache_reset": "sglang"}
    )  # fmt: skip
    assert reset_target(provider, None) == (
        "http://10.1.2.3:30000/flush_cache",
        "http://10.1.2.3:30000/v1",
    )
