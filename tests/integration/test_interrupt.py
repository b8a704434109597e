"""Ctrl-C (SIGINT) or SIGTERM during an embedded run: data kept, run cancelled, no leftovers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import psutil
import pytest
import yaml

from tests.conftest import REPO

# serial: records must arrive before the signal, which a busy machine delays.
pytestmark = [pytest.mark.integration, pytest.mark.serial]

# Bytes the write-ahead log grows by once answers are being stored (a few records and
# progress rows; the schema is written before the simulator starts).
WAL_GROWTH = 16 * 1024


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
def test_interrupted_run_is_cancelled_and_cleaned_up(tmp_path: Path, sig: signal.Signals) -> None:
    scenario = {
        "name": "long",
        "providers": [
            {"name": "sim", "kind": "simulated", "simulate": {"ttft_ms": 50, "itl_ms": 20}}
        ],
        "workload": {
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": 8},
                    "output_tokens": {"dist": "fixed", "value": 50},
                }
            ]
        },
        "load": {"concurrency": [2, 4], "requests_per_level": 400},
    }
    path = tmp_path / "long.yaml"
    path.write_text(yaml.safe_dump(scenario))
    db = tmp_path / "long.duckdb"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENBENCH__")}
    log = tmp_path / "run.log"
    with log.open("wb") as out:
        run = subprocess.Popen(
            [sys.executable, "-m", "api", "run", str(path), "--db", str(db)],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=REPO,
        )  # fmt: skip
    parent = psutil.Process(run.pid)
    deadline = time.monotonic() + 90
    helpers: list[psutil.Process] = []
    # Wait until requests are flowing: a simulated endpoint exists under the worker.
    while time.monotonic() < deadline and run.poll() is None:
        helpers = parent.children(recursive=True)
        if any("workers.simulator" in " ".join(p.cmdline()) for p in helpers if p.is_running()):
            break
        time.sleep(0.2)
    assert run.poll() is None, log.read_text()
    # Let some records arrive. The run holds the DuckDB file, so nothing can query it:
    # its write-ahead log growing by a few answers' worth of rows (records and progress)
    # is the sign, polled instead of a fixed wait that a loaded machine outran.
    wal = db.with_name(db.name + ".wal")
    start = wal.stat().st_size if wal.exists() else 0
    while time.monotonic() < deadline and run.poll() is None:
        if wal.exists() and wal.stat().st_size - start >= WAL_GROWTH:
            break
        time.sleep(0.2)
    time.sleep(1)
    run.send_signal(sig)
    assert run.wait(60) == 130, log.read_text()
    _gone, alive = psutil.wait_procs(helpers, timeout=20)
    assert not alive, [p.cmdline() for p in alive]

    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT state FROM runs").fetchone() == ("cancelled",)
    stored = con.execute("SELECT count(*) FROM request_records").fetchone()
    assert stored is not None and 0 < stored[0] < 800
    assert "interrupted" in log.read_text()
