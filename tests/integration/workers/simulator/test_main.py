"""``python -m workers.simulator``: the process a worker starts for a simulated provider.
It announces its port, serves, and exits by itself once its parent is gone."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
from pydantic import ValidationError

from scenarios.providers.simulate import SimulateSpec
from tests.conftest import REPO
from workers.simulator.__main__ import main
from workers.simulator.process import READY_PREFIX

pytestmark = pytest.mark.integration

SPEC = SimulateSpec.model_validate({"ttft_ms": 1, "itl_ms": 1}).model_dump_json()


@contextmanager
def simulator(*args: str) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    process = subprocess.Popen(
        [sys.executable, "-m", "workers.simulator", "--spec-json", SPEC, *args],
        stdout=subprocess.PIPE,
        cwd=REPO,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().decode().strip()
        assert line.startswith(READY_PREFIX), line
        yield process, int(line.removeprefix(READY_PREFIX))
    finally:
        if process.poll() is None:
            process.terminate()
        process.wait(15)
        if process.stdout is not None:
            process.stdout.close()


def test_serves_the_model_it_was_given_on_the_port_it_announced() -> None:
    with simulator("--model", "sim-proc") as (process, port):
        base = f"http://127.0.0.1:{port}/v1"
        assert [m["id"] for m in httpx.get(f"{base}/models", timeout=10).json()["data"]] == [
            "sim-proc"
        ]
        answer = httpx.post(
            f"{base}/chat/completions",
            json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2},
            timeout=10,
        ).json()
        assert answer["usage"]["completion_tokens"] == 2
        assert process.poll() is None


def test_exits_by_itself_when_its_parent_is_not_the_one_named() -> None:
    # The named parent is not this process's parent (it is gone, as after a SIGKILL of
    # the worker): the simulator stops serving and exits cleanly.
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait(30)
    with simulator("--parent-pid", str(finished.pid)) as (process, _):
        assert process.wait(30) == 0


def test_an_invalid_spec_is_refused_before_serving(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["workers.simulator", "--spec-json", '{"ttft_ms": -1}'])
    with pytest.raises(ValidationError, match="ttft_ms"):
        main()
    monkeypatch.setattr(sys, "argv", ["workers.simulator"])
    with pytest.raises(SystemExit) as exited:
        main()  # --spec-json is required
    assert exited.value.code == 2
