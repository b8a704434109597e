"""A real run moved between DuckDB files as a bundle: ``tokenbench run`` on the embedded
default, ``export``, ``import`` into a fresh file, the same report; imported twice, the
same rows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from analytics.store.bundle_tables import BUNDLE_TABLES
from analytics.store.db import connect
from tests.conftest import REPO, CliResult
from tests.support.figures import same_figures

pytestmark = pytest.mark.integration

SCENARIO = {
    "name": "bundled",
    "providers": [{"name": "sim", "kind": "simulated", "simulate": {"ttft_ms": 20, "itl_ms": 2}}],
    "workload": {
        "mix": [
            {
                "prompt_tokens": {"dist": "fixed", "value": 32},
                "output_tokens": {"dist": "fixed", "value": 8},
            }
        ]
    },
    "load": {"concurrency": [1, 2], "requests_per_level": 6},
}


def rows(db: Path, run_id: str) -> dict[str, int]:
    con = connect(db, read_only=True)
    try:
        return {
            t: int(
                con.execute(f"SELECT count(*) FROM {t} WHERE run_id = ?", [run_id]).fetchall()[0][0]
            )
            for t in BUNDLE_TABLES
        }
    finally:
        con.close()


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A DuckDB file holding one finished run of the embedded default, and its id."""
    folder = tmp_path_factory.mktemp("bundle-run")
    scenario = folder / "s.yaml"
    scenario.write_text(yaml.safe_dump(SCENARIO))
    db = folder / "source.duckdb"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENBENCH__")}
    done = subprocess.run(
        [sys.executable, "-m", "api", "run", str(scenario), "--db", str(db), "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=240,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout[done.stdout.index("{") :])
    assert report["state"] == "finished"
    return db, str(report["run_id"])


def json_report(cli: Callable[..., CliResult], db: Path, run_id: str) -> dict[str, Any]:
    result = cli("report", run_id, "--db", str(db), "--format", "json")
    assert result.code == 0, result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def test_export_then_import_gives_the_same_report(
    source: tuple[Path, str], tmp_path: Path, tokenbench_in_process: Callable[..., CliResult]
) -> None:
    db, run_id = source
    bundle = tmp_path / "run.tbz"
    exported = tokenbench_in_process("export", run_id, "--db", str(db), "-o", str(bundle))
    assert exported.code == 0, exported.stderr
    assert f"exported run {run_id}" in exported.stderr
    assert exported.stdout == ""

    target = tmp_path / "fresh.duckdb"
    first = tokenbench_in_process("import", str(bundle), "--db", str(target), "--format", "json")
    assert first.code == 0, first.stderr
    answer = json.loads(first.stdout)
    assert answer["run_id"] == run_id
    assert answer["rows_skipped"] == 0
    assert answer["rows_added"] == sum(rows(db, run_id).values())
    assert f"imported run {run_id}" in first.stderr
    assert rows(target, run_id) == rows(db, run_id)
    assert rows(target, run_id)["request_records"] == 12

    assert same_figures(
        json_report(tokenbench_in_process, target, run_id),
        json_report(tokenbench_in_process, db, run_id),
    )

    second = tokenbench_in_process("import", str(bundle), "--db", str(target))
    assert second.code == 0, second.stderr
    assert second.stdout == ""
    assert f"0 rows added, {answer['rows_added']} already stored" in second.stderr
    assert rows(target, run_id) == rows(db, run_id)


def test_export_of_an_unknown_run_exits_2(
    source: tuple[Path, str], tmp_path: Path, tokenbench_in_process: Callable[..., CliResult]
) -> None:
    db, _ = source
    result = tokenbench_in_process("export", "nope", "--db", str(db), "-o", str(tmp_path / "x"))
    assert result.code == 2
    assert "no run 'nope'" in result.stderr
    assert not (tmp_path / "x").exists()
