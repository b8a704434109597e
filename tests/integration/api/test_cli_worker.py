"""api/cli/commands/worker.py as a real process: ``worker`` refuses to start without a broker,
once, whether it would run one process or several."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from api.cli.commands import worker
from tests.conftest import CliResult

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("processes", ["1", "3"])
def test_a_worker_needs_a_broker(tokenbench: Callable[..., CliResult], processes: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENBENCH")}
    done = tokenbench(
        worker.worker.__name__, "--region", "nowhere", "--processes", processes, env=env,
        timeout=120,
    )  # fmt: skip
    assert done.code == 1
    assert done.stderr.count("set TOKENBENCH__REDIS__URL") == 1
