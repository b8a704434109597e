"""Several worker processes for one region: ``tokenbench worker --processes N``.

One worker process runs its shards on one event loop, so it uses one core at most
(``docs/scaling.md``). A supervisor starts N independent ``tokenbench worker --processes
1`` children, each a full worker with its own heartbeat, so the control plane counts N
live workers in the region and splits a stage over them (``api/control/parts.py``).

The supervisor:

- restarts a child that dies, unless it died before it was ready or within
  ``early_exit_s`` of that: a configuration error (a bad setting or option) that a
  restart would only repeat, so the supervisor stops the other children and exits with
  that child's exit code. "Ready" is the child's own word (its pid written to a pipe
  when Celery is consuming), not a time since it was spawned: on a loaded machine a
  worker's imports alone can take over 10 s;
- forwards SIGTERM, SIGINT and SIGQUIT to every child and waits for them: each handles
  the signal as a single worker does (SIGTERM and SIGINT a warm shutdown, SIGQUIT a cold
  one), and the supervisor exits 0 when they all did. Children run in process groups of
  their own, so a terminal's Ctrl-C reaches them once, through the supervisor, and is
  not taken for the second Ctrl-C that turns Celery's warm shutdown into a cold one;
- is watched by its children: each exits by itself if the supervisor disappears (killed
  with SIGKILL), as an embedded worker does when its ``tokenbench run`` is gone.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from types import FrameType

# A child that dies sooner than this after it was ready failed to start: not restarted.
EARLY_EXIT_S = 10.0
POLL_S = 0.2
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT)
PARENT_PID_ENV = "TOKENBENCH_PARENT_PID"
# The descriptor a child writes "<pid>\n" to once it is ready (workers/runtime/worker_main.py).
READY_FD_ENV = "TOKENBENCH_READY_FD"


@dataclass
class Child:
    """One worker process, and when it said it was ready (None: not yet)."""

    index: int
    process: subprocess.Popen[bytes]
    ready_at: float | None = None


def exit_code(returncode: int) -> int:
    """A child's return code as a shell would report it (killed by signal N: 128 + N)."""
    return 128 - returncode if returncode < 0 else returncode


def worker_command(region: str, concurrency: int, loglevel: str) -> list[str]:
    """The command line of one child: a single worker process of ``region``."""
    return [
        sys.executable, "-m", "api", "worker", "--processes", "1", "--region", region,
        "--concurrency", str(concurrency), "--loglevel", loglevel,
    ]  # fmt: skip


class Supervisor:
    """Keeps ``processes`` copies of ``command`` running until it is signalled."""

    def __init__(
        self,
        command: Sequence[str],
        processes: int,
        early_exit_s: float = EARLY_EXIT_S,
        env: dict[str, str] | None = None,
    ) -> None:
        self.command = list(command)
        self.processes = processes
        self.early_exit_s = early_exit_s
        self._ready_read, self._ready_write = os.pipe()
        os.set_blocking(self._ready_read, False)
        # Children watch this process and exit when it is gone (workers/runtime/worker_main.py),
        # and say on the pipe when they are ready.
        self.env = {
            **(os.environ if env is None else env),
            PARENT_PID_ENV: str(os.getpid()),
            READY_FD_ENV: str(self._ready_write),
        }
        self.children: list[Child] = []
        self.stopping: signal.Signals | None = None  # the signal passed on to the children
        self.code = 0

    def run(self) -> int:
        """Start the children, keep them running, return the exit code once all ended."""
        previous = {sig: signal.signal(sig, self._forward) for sig in FORWARDED}
        try:
            self._watch_parent()
            for index in range(self.processes):
                self._start(index)
            while self.children:
                time.sleep(POLL_S)
                self._read_ready()
                for child in list(self.children):
                    if child.process.poll() is not None:
                        self._ended(child)
            return self.code
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            os.close(self._ready_read)
            os.close(self._ready_write)

    def _start(self, index: int) -> None:
        process = subprocess.Popen(
            self.command,
            env=self.env,
            stdin=subprocess.DEVNULL,
            process_group=0,
            pass_fds=(self._ready_write,),
        )
        self.children.append(Child(index, process))
        if self.stopping is not None:  # signalled while it was being started
            process.send_signal(self.stopping)

    def _ended(self, child: Child) -> None:
        """A child exited: restart it, or stop everything if it never got going."""
        self.children.remove(child)
        code = exit_code(child.process.returncode)
        if self.stopping is not None:
            self.code = self.code or code
            return
        self._read_ready()  # it may have said it was ready just before it ended
        lived_s = 0.0 if child.ready_at is None else time.monotonic() - child.ready_at
        if lived_s < self.early_exit_s:
            when = (
                "before it was ready"
                if child.ready_at is None
                else f"{lived_s:.1f} s after it was ready"
            )
            _say(
                f"worker process {child.index} (pid {child.process.pid}) exited with code "
                f"{code} {when}: stopping the others, not restarting"
            )
            self.code = code or 1  # a worker never ends by itself: that is a failure
            self._stop(signal.SIGTERM)
            return
        _say(
            f"worker process {child.index} (pid {child.process.pid}) exited with code "
            f"{code} after {lived_s:.0f} s: starting it again"
        )
        self._start(child.index)

    def _read_ready(self) -> None:
        """Note the children that said they are ready since the last look."""
        try:
            said = os.read(self._ready_read, 65536).decode()
        except BlockingIOError:
            return
        now = time.monotonic()
        pids = {int(word) for word in said.split()}
        for child in self.children:
            if child.process.pid in pids and child.ready_at is None:
                child.ready_at = now

    def _forward(self, signum: int, _frame: FrameType | None) -> None:
        self._stop(signal.Signals(signum))

    def _stop(self, sig: signal.Signals) -> None:
        """Pass ``sig`` to every running child; none is restarted from now on."""
        self.stopping = sig
        for child in self.children:
            if child.process.poll() is None:
                # It may end between the poll and the signal.
                with contextlib.suppress(ProcessLookupError):
                    child.process.send_signal(sig)

    def _watch_parent(self) -> None:
        """Embedded in ``tokenbench run``: cold-stop the children when that process is
        gone (the supervisor itself then exits once they have)."""
        parent = os.environ.get(PARENT_PID_ENV)
        if not parent:
            return

        def watch() -> None:
            while os.getppid() == int(parent):
                time.sleep(1.0)
            os.kill(os.getpid(), signal.SIGQUIT)

        threading.Thread(target=watch, name="tokenbench-parent-watch", daemon=True).start()


def _say(message: str) -> None:
    print(f"tokenbench worker: {message}", file=sys.stderr, flush=True)


def run_worker_processes(region: str, concurrency: int, loglevel: str, processes: int) -> int:
    """Run ``processes`` worker processes of ``region`` until signalled; the exit code."""
    return Supervisor(worker_command(region, concurrency, loglevel), processes).run()


__all__ = [
    "EARLY_EXIT_S",
    "READY_FD_ENV",
    "Supervisor",
    "exit_code",
    "run_worker_processes",
    "worker_command",
]
