"""api/cli/signals.py in a real process: after ``sigterm_as_interrupt()`` SIGTERM raises
KeyboardInterrupt as Ctrl-C does, so a command's own cleanup runs; SIGINT does too even
when the process inherited it ignored (a shell's background job)."""

from __future__ import annotations

import shlex
import signal
import subprocess
import sys

import pytest

from api.cli import signals
from tests.conftest import REPO

pytestmark = pytest.mark.integration

CHILD = f"""
import sys, time
from {signals.__name__} import sigterm_as_interrupt
sigterm_as_interrupt()
try:
    print("ready", flush=True)  # inside the try: the signal may arrive as it returns
    time.sleep(120)
except KeyboardInterrupt:
    print("cleanup ran", flush=True)
    sys.exit(0)
sys.exit(3)
"""


def _child(ignore_sigint: bool) -> subprocess.Popen[str]:
    """The child, started by a shell that ``exec``s it (so signals reach it directly)."""
    command = "exec " + shlex.join([sys.executable, "-c", CHILD])
    if ignore_sigint:  # as a shell starts a background job: SIGINT ignored, inherited
        command = f"trap '' INT; {command}"
    return subprocess.Popen(
        ["/bin/sh", "-c", command],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        cwd=REPO,
    )


def _signalled(process: subprocess.Popen[str], sig: signal.Signals) -> str:
    """Send ``sig`` once the child is ready; its output after that."""
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "ready"  # handlers installed
    process.send_signal(sig)
    try:
        return process.communicate(timeout=60)[0]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)


@pytest.mark.parametrize(
    ("sig", "ignore_sigint"),
    [
        (signal.SIGTERM, False),
        (signal.SIGINT, False),
        (signal.SIGTERM, True),
        (signal.SIGINT, True),
    ],
    ids=["sigterm", "sigint", "sigterm-in-background", "sigint-in-background"],
)
def test_the_signal_interrupts_and_cleanup_runs(sig: signal.Signals, ignore_sigint: bool) -> None:
    with _child(ignore_sigint) as process:
        output = _signalled(process, sig)
    assert process.returncode == 0, output
    assert output.strip() == "cleanup ran"


def test_without_it_sigterm_kills_on_the_spot() -> None:
    """What it fixes: the default action skips every cleanup."""
    script = CHILD.replace("sigterm_as_interrupt()", "pass")
    with subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=REPO
    ) as process:
        output = _signalled(process, signal.SIGTERM)
    assert process.returncode == -signal.SIGTERM
    assert "cleanup ran" not in output
