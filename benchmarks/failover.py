"""What a gateway's failover costs: clients' error rate and TTFT with and without a fallback.

    python benchmarks/failover.py [--requests 200] [--rps 20] [--stall-ms 0] [--no-litellm]

One `tokenbench run` (the real worker path) sends the same open-loop load to up to three
providers at once: `direct` (the first upstream itself), `tokenbench-gw` (`tokenbench
gateway` with that upstream as primary and a second one as fallback) and `litellm` (the
LiteLLM proxy with the same two upstreams as a model and its fallback). The run starts
the two simulated upstreams itself (scenario `upstreams`): `up-a` answers 429 to every
request for 1 s of every 2 s (after `--stall-ms` of silence), `up-b` never fails. Each
gateway is warmed up first (30 requests to healthy stand-ins on the same ports), so its
own start-up is not counted as failover. The
table is the run's failover report: requests, the error rate clients saw, the share that
fell back, TTFT p50/p99 of requests served at their first try and of those that fell
back, the time from first attempt to serving attempt at the upstreams, and how many
attempts each upstream got, with the machine's load average.

LiteLLM is never a dependency of tokenbench: it is pip-installed (`litellm[proxy]`, the
version pinned below) into a venv of its own under ~/.cache/tokenbench/bench-litellm on
first use; without a package registry, or with `--no-litellm`, its row is skipped and
said so. The tokenbench gateway needs a control plane for its (empty) shadow session:
a private Redis and `tokenbench serve` are started for it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import yaml
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from api.local.redis_server import free_port, start_redis_server  # noqa: E402
from tests.support.failover_stack import (  # noqa: E402
    bursting_upstreams,
    failover_scenario,
    gateway_config,
    start_gateway,
)

TOKEN = "bench-token"
# The newest release whose proxy extra resolves from PyPI alone (later ones name a
# litellm-proxy package that is not published there).
LITELLM = "litellm[proxy]==1.90.7"
LITELLM_VENV = Path.home() / ".cache" / "tokenbench" / "bench-litellm"


def litellm_binary(console: Console) -> Path | None:
    """The proxy's executable in its own venv (installed on first use), or None."""
    binary = LITELLM_VENV / "bin" / "litellm"
    if binary.exists():
        return binary
    console.print(f"installing {LITELLM} into {LITELLM_VENV} (once; a few minutes)")
    try:
        subprocess.run([sys.executable, "-m", "venv", str(LITELLM_VENV)], check=True)
        subprocess.run(
            [str(LITELLM_VENV / "bin" / "pip"), "install", "-q", LITELLM], check=True, timeout=1800
        )
    except (subprocess.SubprocessError, OSError) as exc:
        console.print(f"[yellow]litellm skipped: it could not be installed ({exc})")
        return None
    return binary if binary.exists() else None


def start_litellm(
    binary: Path, up_a: str, up_b: str, tmp: Path
) -> tuple[subprocess.Popen[bytes], str]:
    """The LiteLLM proxy with ``simulated`` on the first upstream, falling back to the
    second; no retries (a retry is not a fallback), so every 429 is one fallback, and
    client x- headers forwarded (the request id)."""
    config = {
        "model_list": [
            {"model_name": "simulated",
             "litellm_params": {"model": "openai/simulated", "api_base": up_a, "api_key": "none"}},
            {"model_name": "backup",
             "litellm_params": {"model": "openai/simulated", "api_base": up_b, "api_key": "none"}},
        ],
        "router_settings": {"num_retries": 0, "fallbacks": [{"simulated": ["backup"]}]},
        "litellm_settings": {"num_retries": 0, "request_timeout": 60},
        # LiteLLM drops unknown headers and the body's user field by default; this passes
        # x- headers on, x-tokenbench-request among them, so its attempts are attributed.
        "general_settings": {"forward_client_headers_to_llm_api": True},
    }  # fmt: skip
    path = tmp / "litellm.yaml"
    path.write_text(yaml.safe_dump(config))
    port = free_port()
    env = {**os.environ, "LITELLM_LOG": "ERROR"}
    with (tmp / "litellm.log").open("wb") as out:
        process = subprocess.Popen(
            [str(binary), "--config", str(path), "--host", "127.0.0.1", "--port", str(port)],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
        )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError((tmp / "litellm.log").read_text(errors="replace")[-3000:])
        try:
            if httpx.get(f"{base}/health/liveliness", timeout=1).status_code == 200:
                return process, f"{base}/v1"
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    process.kill()
    raise TimeoutError("litellm did not start within 180 s")


def warm_up(base: str, ports: tuple[int, int], tmp: Path, requests: int = 30) -> float:
    """Send ``requests`` through a gateway at ``base`` to healthy stand-ins on the
    upstreams' ports (stopped before the run starts the real ones): a proxy's first
    requests pay for its lazy start-up (LiteLLM's first few take seconds), which is not
    what failover costs. Returns the last warm-up request's seconds."""
    stand_ins = []
    for port in ports:
        with (tmp / f"warm-{port}.log").open("wb") as out:
            args = ["simulate", "--port", str(port), "--ttft-ms", "10", "--itl-ms", "1"]
            command = [sys.executable, "-m", "api", *args]
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
            stand_ins.append(process)
    body = {"model": "simulated", "max_tokens": 4, "stream": True,
            "messages": [{"role": "user", "content": "warm up"}]}  # fmt: skip
    took = 0.0
    try:
        for port in ports:
            _wait_healthy(f"http://127.0.0.1:{port}/health")
        for _ in range(requests):
            start = time.monotonic()
            httpx.post(f"{base}/chat/completions", json=body, timeout=120).raise_for_status()
            took = time.monotonic() - start
    finally:
        for stand_in in stand_ins:
            stand_in.terminate()
            stand_in.wait(10)
    return took


def _wait_healthy(url: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.1)


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


def print_table(console: Console, report: dict[str, Any], load: tuple[float, ...]) -> None:
    table = Table(
        title="failover: up-a answers 429 for 1 s of every 2 s, up-b never fails",
        caption=f"ms; load average during the run {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}",
    )
    for header in ("provider", "n", "client err", "fell back", "TTFT p50 1st try",
                   "TTFT p99 1st try", "TTFT p50 fell back", "TTFT p99 fell back",
                   "failover mean", "up-a tries", "up-b tries"):  # fmt: skip
        table.add_column(header, justify="left" if header == "provider" else "right")
    tries = {(u["provider"], u["upstream"]): u["received"] for u in report["upstreams"]}
    for row in report["failover"]:
        table.add_row(
            row["provider"], f"{row['requests']:,}", f"{row['client_error_pct']:.1f} %",
            f"{row['fallback_pct'] or 0:.1f} %", _ms(row["ttft_first_try_p50_ms"]),
            _ms(row["ttft_first_try_p99_ms"]), _ms(row["ttft_fell_back_p50_ms"]),
            _ms(row["ttft_fell_back_p99_ms"]), _ms(row["failover_mean_ms"]),
            f"{tries.get((row['provider'], 'up-a'), 0):,}",
            f"{tries.get((row['provider'], 'up-b'), 0):,}",
        )  # fmt: skip
    console.print(table)
    for log in report["upstream_logs"]:
        console.print(
            f"{log['upstream']}: {log['entries']:,} log entries, {log['unmatched']:,} matched "
            f"no request, {log['missed']:,} dropped before they were read"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200, help="per provider")
    parser.add_argument("--rps", type=float, default=20.0, help="per provider, open loop")
    parser.add_argument("--stall-ms", type=float, default=0.0, help="up-a's silence before a 429")
    parser.add_argument("--no-litellm", action="store_true", help="skip the LiteLLM proxy")
    args = parser.parse_args()
    console = Console(width=200)  # the table is wide; never wrapped into a pipe
    tmp = Path(tempfile.mkdtemp(prefix="tb-failover-bench-"))
    redis = start_redis_server()
    env = {**os.environ, "TOKENBENCH__REDIS__URL": redis.url, "TOKENBENCH_TOKEN": TOKEN,
           "TOKENBENCH__API__TOKENS": f'["{TOKEN}"]',
           "TOKENBENCH__EGRESS__ALLOW_LOOPBACK": "true"}  # fmt: skip
    port_a, port_b, api_port = free_port(), free_port(), free_port()
    up_a, up_b = f"http://127.0.0.1:{port_a}/v1", f"http://127.0.0.1:{port_b}/v1"
    stopping: list[Any] = []
    try:
        with (tmp / "api.log").open("wb") as out:
            serve = subprocess.Popen(
                [sys.executable, "-m", "api", "serve", "--port", str(api_port), "--db",
                 str(tmp / "api.duckdb")],
                stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO,
            )  # fmt: skip
        stopping.append(serve)
        api = f"http://127.0.0.1:{api_port}"
        _wait_healthy(f"{api}/healthz")
        gateway = start_gateway(gateway_config(up_a, [up_b]), "bench-gw", tmp, api, env)
        stopping.append(gateway)
        providers = {"direct": up_a, "tokenbench-gw": gateway.base}
        binary = None if args.no_litellm else litellm_binary(console)
        if binary is None:
            console.print("[yellow]litellm: skipped (--no-litellm, or not installable here)")
        else:
            litellm, providers["litellm"] = start_litellm(binary, up_a, up_b, tmp)
            stopping.append(litellm)
        for name, base in providers.items():
            if name != "direct":
                last = warm_up(base, (port_a, port_b), tmp)
                console.print(f"{name}: warmed up (last warm-up request {last * 1000:.0f} ms)")
        scenario = failover_scenario(
            "failover-bench",
            providers,
            bursting_upstreams(port_a, port_b, args.stall_ms),
            args.requests,
            args.rps,
        )
        path = tmp / "scenario.yaml"
        path.write_text(yaml.safe_dump(scenario))
        run_env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENBENCH")}
        report_path = tmp / "report.json"
        done = subprocess.run(
            [sys.executable, "-m", "api", "run", str(path), "--db", str(tmp / "run.duckdb"),
             "--format", "json", "-o", str(report_path)],
            env=run_env, cwd=REPO, capture_output=True, text=True, check=False,
        )  # fmt: skip
        load = os.getloadavg()
        if not report_path.exists():
            console.print(done.stderr)
            raise SystemExit(f"tokenbench run failed (exit {done.returncode})")
        print_table(console, json.loads(report_path.read_text()), load)
    finally:
        for part in reversed(stopping):
            if isinstance(part, subprocess.Popen):
                part.terminate()
                part.wait(30)
            else:
                part.stop()
        redis.stop()


if __name__ == "__main__":
    main()
