"""The embedded default: a private Redis and local regional workers, started for one command.

``tokenbench run`` uses this when it needs to: without ``TOKENBENCH__REDIS__URL`` it
starts a Redis-compatible server; for each region of the scenario with no live worker
it starts one worker process (the same ``tokenbench worker`` a deployment runs). All of
it is stopped on exit, Ctrl-C included.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import redis

from api.local.redis_server import start_redis_server
from scenarios.settings import env_name, get_settings
from workers.runtime.worker_main import live_workers

WORKER_START_TIMEOUT_S = 60.0


class LocalWorker:
    """A ``tokenbench worker`` subprocess for one region, logging to a file."""

    def __init__(
        self,
        region: str,
        redis_url: str,
        log_dir: Path,
        concurrency: int = 16,
        secret_hosts: str | None = None,
        processes: int = 1,
    ) -> None:
        self.region = region
        self.processes = processes
        self.log_path = log_dir / f"worker-{region}.log"
        # The worker exits by itself if this process dies without cleaning up.
        env = {
            **os.environ,
            env_name("redis.url"): redis_url,
            "TOKENBENCH_PARENT_PID": str(os.getpid()),
            # Embedded workers serve the user's own scenario on the user's own machine:
            # their endpoints on loopback and the private network are expected.
            env_name("egress.allow_loopback"): "true",
            env_name("egress.allow_private"): "true",
        }
        if secret_hosts is not None:
            # The user's own scenario's keys, bound to its own hosts (workers/client/secrets.py).
            env[env_name("worker.secret_hosts")] = secret_hosts
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "api", "worker", "--region", region,
             "--concurrency", str(concurrency), "--processes", str(processes)],
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip

    def log_tail(self, chars: int = 2000) -> str:
        """The end of the worker's log, for error messages."""
        return self.log_path.read_text(errors="replace")[-chars:]

    def stop(self) -> None:
        """Cold shutdown (SIGQUIT: no waiting for running shards), then kill if needed."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(3)  # SIGQUIT
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self._log.close()


def wait_for_workers(client: redis.Redis, workers: list[LocalWorker], timeout_s: float) -> None:
    """Block until each worker's region has a heartbeat per process (a stage is split
    over the processes alive when the run starts); fail with its log otherwise."""
    deadline = time.monotonic() + timeout_s
    waiting = list(workers)
    while waiting:
        for worker in list(waiting):
            if worker.process.poll() is not None:
                raise RuntimeError(
                    f"worker for region {worker.region!r} exited:\n{worker.log_tail()}"
                )
            if live_workers(client, worker.region) >= worker.processes:
                waiting.remove(worker)
        if waiting and time.monotonic() > deadline:
            raise RuntimeError(
                f"worker for region {waiting[0].region!r} did not start within "
                f"{timeout_s:.0f} s:\n{waiting[0].log_tail()}"
            )
        time.sleep(0.1)


@contextlib.contextmanager
def local_stack(
    regions: list[str], redis_url: str | None, secret_hosts: str | None = None
) -> Iterator[str]:
    """Yield a Redis URL with a live worker for every region, starting what is missing;
    ``secret_hosts`` (JSON) is the secret bindings those workers get."""
    with contextlib.ExitStack() as stack:
        if redis_url is None:
            server = start_redis_server()
            stack.callback(server.stop)
            redis_url = server.url
        client = redis.Redis.from_url(redis_url)
        stack.callback(client.close)
        log_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tokenbench-")))
        missing = [r for r in regions if not live_workers(client, r)]
        processes = get_settings().worker.processes or 1
        workers = []
        for region in missing:
            worker = LocalWorker(
                region, redis_url, log_dir, secret_hosts=secret_hosts, processes=processes
            )
            stack.callback(worker.stop)
            workers.append(worker)
        wait_for_workers(client, workers, WORKER_START_TIMEOUT_S)
        yield redis_url
