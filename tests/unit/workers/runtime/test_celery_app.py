"""The Celery application's settings: read from the environment on first use, not at
import, and chosen so that a shard is never lost (late acks, one prefetched message,
requeue on worker loss, broker retried forever). Each check runs in a fresh process,
because the application configures itself once per process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import celery

from tests.conftest import REPO
from workers.runtime.celery_app import app

PROBE = """
import json, os
from workers.runtime.celery_app import app
# Importing reads no environment: what is set after the import is what counts.
os.environ["TOKENBENCH__REDIS__URL"] = "redis://127.0.0.1:6390/3"
os.environ["TOKENBENCH__WORKER__REGION"] = "ap-south"
os.environ["TOKENBENCH__CONTROL__VISIBILITY_TIMEOUT_S"] = "7200"
conf = app.conf
names = [
    "broker_url", "broker_transport", "broker_connection_max_retries",
    "broker_connection_retry", "broker_connection_retry_on_startup", "task_acks_late",
    "task_reject_on_worker_lost", "worker_prefetch_multiplier", "task_ignore_result",
    "task_serializer", "accept_content", "task_default_queue", "imports",
    "worker_cancel_long_running_tasks_on_connection_loss",
]
print(json.dumps({
    **{name: conf[name] for name in names},
    "visibility_timeout": conf.broker_transport_options["visibility_timeout"],
    "is_current": app is __import__("celery").current_app,
}))
"""


def _probe() -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENBENCH")}
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_configuration_comes_from_the_environment_at_first_use_and_never_loses_a_shard() -> None:
    from scenarios.wire.contract import region_queue
    from workers.runtime.broker import TRANSPORT

    conf = _probe()
    assert conf["broker_url"] == "redis://127.0.0.1:6390/3"
    assert conf["broker_transport"] == TRANSPORT
    assert conf["task_default_queue"] == region_queue("ap-south")
    assert conf["visibility_timeout"] == 7200
    # At least once: acknowledged after the task, redelivered if its worker dies.
    assert conf["task_acks_late"] is True
    assert conf["task_reject_on_worker_lost"] is True
    assert conf["worker_prefetch_multiplier"] == 1
    # A worker outlives any broker outage, and a running shard keeps running through it.
    assert conf["broker_connection_max_retries"] is None
    assert conf["broker_connection_retry"] is True
    assert conf["broker_connection_retry_on_startup"] is True
    assert conf["worker_cancel_long_running_tasks_on_connection_loss"] is False
    # JSON only (no pickle from the broker); no result backend to fill.
    assert conf["task_serializer"] == "json" and conf["accept_content"] == ["json"]
    assert conf["task_ignore_result"] is True
    assert conf["imports"] == ["workers.tasks"]
    assert conf["is_current"] is False


def test_the_app_is_never_celerys_process_wide_default() -> None:
    """Importing tokenbench into another Celery program leaves that program's app alone."""
    assert celery.current_app is not app
    assert app.main == "tokenbench"
