"""api/local/embedded.py: ``local_stack`` starts what a run is missing (a private Redis,
a worker per region without a live one) and stops all of it on exit; a worker that
exits or does not come up is an error carrying its log."""

from __future__ import annotations

import json
from pathlib import Path

import psutil
import pytest
import redis

from api.local.embedded import LocalWorker, local_stack, wait_for_workers
from api.local.redis_server import RedisServer
from tests.integration.api.conftest import lonely_region
from workers.runtime.worker_main import live_workers

pytestmark = pytest.mark.integration


def _python_children() -> set[int]:
    """This process's own Python subprocesses (a worker is one; Redis is not)."""
    return {
        child.pid for child in psutil.Process().children() if "python" in " ".join(child.cmdline())
    }


def test_without_a_redis_url_a_private_server_lives_as_long_as_the_stack() -> None:
    with local_stack([], None) as url:
        client = redis.Redis.from_url(url)
        assert client.ping()
        client.close()
    with pytest.raises(redis.ConnectionError):
        redis.Redis.from_url(url, socket_connect_timeout=2).ping()


def test_a_worker_per_region_without_one_and_only_then(redis_server: RedisServer) -> None:
    region = lonely_region()
    bindings = json.dumps({"MY_KEY": ["api.example.com"]})
    client = redis.Redis.from_url(redis_server.url)
    before = _python_children()
    try:
        with local_stack([region], redis_server.url, secret_hosts=bindings) as url:
            assert url == redis_server.url  # the configured Redis: no server of its own
            assert live_workers(client, region)
            [started] = _python_children() - before
            environ = psutil.Process(started).environ()
            assert environ["TOKENBENCH__REDIS__URL"] == redis_server.url
            assert environ["TOKENBENCH_PARENT_PID"] == str(psutil.Process().pid)
            assert environ["TOKENBENCH__WORKER__SECRET_HOSTS"] == bindings
            assert environ["TOKENBENCH__EGRESS__ALLOW_LOOPBACK"] == "true"
            # The region has a live worker now: a second stack starts nothing.
            with local_stack([region], redis_server.url):
                assert _python_children() - before == {started}
        assert not psutil.pid_exists(started)  # stopped and reaped on exit
    finally:
        client.close()


def test_a_worker_that_exits_is_an_error_with_its_log(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    client = redis.Redis.from_url(redis_server.url)
    worker = LocalWorker("broken", "not-a-redis-url", tmp_path)
    try:
        with pytest.raises(RuntimeError) as failed:
            wait_for_workers(client, [worker], timeout_s=60)
    finally:
        worker.stop()
        client.close()
    message = str(failed.value)
    assert message.startswith("worker for region 'broken' exited:")
    assert "Redis URL must specify one of the following schemes" in message


def test_a_worker_that_does_not_come_up_in_time_is_an_error(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    client = redis.Redis.from_url(redis_server.url)
    region = lonely_region()
    worker = LocalWorker(region, redis_server.url, tmp_path)
    try:
        with pytest.raises(
            RuntimeError, match=f"worker for region '{region}' did not start within 0 s"
        ):
            wait_for_workers(client, [worker], timeout_s=0)
    finally:
        worker.stop()
        client.close()
    assert worker.process.returncode is not None  # stopped: nothing left running
