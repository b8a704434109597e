"""A failover run's parts: the scenario with two simulated upstreams (the first failing
in bursts), and `tokenbench gateway` processes in front of them, with or without a
fallback. Shared by the failover tests and `benchmarks/failover.py`."""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from api.local.redis_server import free_port

REPO = Path(__file__).resolve().parents[2]
# The first upstream's bursts: every other second, 100 % of its requests stall and then
# get a 429; the second upstream never fails.
BURST = {"every_s": 2.0, "for_s": 1.0}
UPSTREAM_TIMING = {"ttft_ms": 10, "itl_ms": 1}


def bursting_upstreams(port_a: int, port_b: int, stall_ms: float) -> list[dict[str, Any]]:
    """``up-a`` (429 bursts, each 429 after ``stall_ms``) and ``up-b`` (healthy)."""
    faults: list[dict[str, Any]] = [{"kind": "http_429", "burst": BURST, "retry_after_s": 1}]
    if stall_ms > 0:
        faults.insert(0, {"kind": "stall", "burst": BURST, "stall_ms": stall_ms})
    return [
        {"name": "up-a", "port": port_a, "simulate": {**UPSTREAM_TIMING, "faults": faults}},
        {"name": "up-b", "port": port_b, "simulate": UPSTREAM_TIMING},
    ]


def failover_scenario(
    name: str,
    providers: dict[str, str],
    upstreams: list[dict[str, Any]],
    requests: int,
    rps: float,
) -> dict[str, Any]:
    """An open loop at ``rps`` to each provider (name → base URL, kind openai)."""
    return {
        "name": name,
        "seed": 5,
        "providers": [
            {"name": provider, "kind": "openai", "base_url": url, "model": "simulated"}
            for provider, url in providers.items()
        ],
        "workload": {
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": 16},
                    "output_tokens": {"dist": "fixed", "value": 8},
                }
            ]
        },
        "load": {"rate": {"rps": rps}, "requests_per_level": requests},
        "upstreams": upstreams,
    }


def gateway_config(primary: str, fallbacks: list[str]) -> dict[str, Any]:
    """A gateway in front of ``primary`` (a base URL) falling back to ``fallbacks``; it
    samples nothing (the shadow side is not what is measured here)."""
    return {
        "name": "failover",
        "primary": {"name": "primary", "kind": "openai", "base_url": primary, "model": "m"},
        "fallbacks": [
            {"name": f"fallback-{i}", "kind": "openai", "base_url": url, "model": "simulated"}
            for i, url in enumerate(fallbacks, 1)
        ],
        "sample_rate": 0.0,
        "regions": ["failover-shadows"],
    }


@dataclass
class GatewayProcess:
    """A running `tokenbench gateway`."""

    process: subprocess.Popen[bytes]
    base: str  # .../v1
    log: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


def start_gateway(
    config: dict[str, Any], name: str, tmp: Path, api_base: str, env: dict[str, str]
) -> GatewayProcess:
    """`tokenbench gateway` with ``config`` on a free port, once healthy (``env`` names the
    control plane's token and the workers' Redis)."""
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    port = free_port()
    log = tmp / f"{name}.log"
    with log.open("wb") as handle:
        process = subprocess.Popen(
            [
                sys.executable, "-m", "api", "gateway", "--config", str(path),
                "--port", str(port), "--server", api_base, "--instance", name,
                "--wait-for-workers", "--drain-s", "0.5",
            ],
            stdout=handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=REPO,
        )  # fmt: skip
    gateway = GatewayProcess(process, f"http://127.0.0.1:{port}/v1", log)
    deadline = time.monotonic() + 120
    while True:
        if process.poll() is not None:
            raise RuntimeError(log.read_text(errors="replace"))
        try:
            if httpx.get(f"http://127.0.0.1:{port}/gateway/health", timeout=1).status_code == 200:
                return gateway
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            gateway.stop()
            raise TimeoutError(f"gateway {name} not healthy:\n{log.read_text(errors='replace')}")
        time.sleep(0.1)


@dataclass
class SimulatorProcess:
    """A running `tokenbench simulate`."""

    process: subprocess.Popen[bytes]
    base: str  # .../v1

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)


def start_simulator(args: list[str], log: Path) -> SimulatorProcess:
    """`tokenbench simulate ARGS` on a free port, once healthy."""
    port = free_port()
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "api", "simulate", "--port", str(port), *args],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=REPO,
        )  # fmt: skip
    simulator = SimulatorProcess(process, f"http://127.0.0.1:{port}/v1")
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return simulator
        except httpx.HTTPError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            simulator.stop()
            raise RuntimeError(log.read_text(errors="replace"))
        time.sleep(0.05)
