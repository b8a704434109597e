"""``POST /v1/imports`` against a real control plane: imported files are untrusted.

Attacks tried (docs/security.md, docs/import.md), on other tools' files and on run
bundles: a viewer importing; a team reading or
learning of another team's private import (the same files give each team a run of its
own, so an answer never tells whether another team imported them); hostile files (JSON
nested a million deep, a gzip bomb, a tar whose names climb out with ``..``, absolute
paths and links, bytes that are not text); a body over the cap. Every refusal is a
4xx that names the problem, with no traceback and nothing stored.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import tarfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import typer
from typer.testing import CliRunner

from analytics.store.bundles import export_run
from analytics.store.db import connect
from api.cli.commands.imports import import_command
from tests.conftest import API_TOKEN, Proc, start_control_plane
from tests.support.regional_run import store_regional_run

LLMD = Path(__file__).parents[1] / "data" / "imports" / "llmd"
REPORT = next((LLMD / "0.1").glob("*.json"))
OCTETS = {"content-type": "application/octet-stream"}
MAX_BYTES = 4 * 1024 * 1024


class Plane:
    """A control plane of the test's own, with a small upload cap."""

    def __init__(self, proc: Proc, base: str, db: Path) -> None:
        self.proc, self.base, self.db = proc, base, db

    def call(
        self,
        method: str,
        path: str,
        token: str,
        headers: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> httpx.Response:
        auth = {"authorization": f"Bearer {token}", **(headers or {})}
        return httpx.request(method, self.base + path, headers=auth, timeout=120, **kwargs)

    def mint(self, team: str, role: str) -> str:
        answer = self.call("POST", "/v1/tokens", API_TOKEN, json={"team": team, "role": role})
        assert answer.status_code == 201, answer.text
        return str(answer.json()["token"])

    def upload(self, token: str, body: bytes, **params: str) -> httpx.Response:
        return self.call("POST", "/v1/imports", token, content=body, headers=OCTETS, params=params)


@pytest.fixture(scope="module")
def plane(worker_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    tmp = tmp_path_factory.mktemp("imports")
    env = {**worker_env, "TOKENBENCH__API__MAX_DATASET_BYTES": str(MAX_BYTES)}
    proc, base = start_control_plane(env, tmp / "api.duckdb", tmp / "api.log")
    yield Plane(proc, base, tmp / "api.duckdb")
    proc.stop()


def _refused(answer: httpx.Response, status: int, *needles: str) -> None:
    assert answer.status_code == status, answer.text
    assert "Traceback" not in answer.text
    for needle in needles:
        assert needle in answer.text, answer.text


def test_an_import_is_its_own_teams_run(plane: Plane) -> None:
    red, blue = plane.mint("red", "submitter"), plane.mint("blue", "submitter")
    viewer = plane.mint("red", "viewer")
    body = REPORT.read_bytes()
    _refused(plane.upload(viewer, body, name="report.json"), 403)
    # The name tells a tool's files apart (a report.json, a profile_export.jsonl): without
    # it, the body is refused by name, with what was expected.
    _refused(plane.upload(red, body), 422, "not a result file of a tool", "(upload)")
    first = plane.upload(red, body, visibility="team", name="report.json")
    assert first.status_code == 201, first.text
    (run,) = first.json()["runs"]
    assert run["tool"] == "llmd" and run["added"] and not run["per_request"]
    again = plane.upload(red, body, visibility="team", name="report.json")
    assert again.status_code == 200 and again.json()["runs"][0]["run_id"] == run["run_id"]
    # Blue's import of the same bytes is blue's own run: a 201, another id.
    theirs = plane.upload(blue, body, name="report.json")
    assert theirs.status_code == 201
    assert theirs.json()["runs"][0]["run_id"] != run["run_id"]
    # Red's private import is not blue's to read, list, report or query.
    assert plane.call("GET", f"/v1/runs/{run['run_id']}", blue).status_code == 404
    assert plane.call("GET", f"/v1/runs/{run['run_id']}/report", blue).status_code == 404
    listed = plane.call("GET", "/v1/runs", blue).json()
    assert isinstance(listed, list), listed
    assert run["run_id"] not in {r["id"] for r in listed}
    sql = plane.call(
        "POST",
        "/v1/sql",
        blue,
        json={"query": "SELECT run_id FROM run_imports", "max_staleness_s": 0},
    )
    assert sql.status_code == 200, sql.text
    assert run["run_id"] not in sql.text
    report = plane.call("GET", f"/v1/runs/{run['run_id']}/report?format=json", red)
    assert report.status_code == 200
    assert report.json()["imported"]["tool"] == "llmd"


def _tar(members: list[tarfile.TarInfo], data: dict[str, bytes], gz: bool = False) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz" if gz else "w") as tar:
        for info in members:
            tar.addfile(info, io.BytesIO(data[info.name]) if info.isreg() else None)
    return buffer.getvalue()


def _member(name: str, size: int = 0, kind: bytes = tarfile.REGTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.type = size, kind
    if kind == tarfile.SYMTYPE:
        info.linkname = "/etc/passwd"
    return info


def _bomb(size: int) -> bytes:
    """A gzip-compressed tar of one member of ``size`` zero bytes, made in chunks."""
    header = _member("a/report.json", size).tobuf(format=tarfile.GNU_FORMAT)
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: a gzip stream
    parts = [packer.compress(header)]
    chunk = b"\0" * (16 << 20)
    for _ in range(size // len(chunk)):
        parts.append(packer.compress(chunk))
    parts.append(packer.flush())
    return b"".join(parts)


def _runs(plane: Plane) -> int:
    answer = plane.call("GET", "/v1/runs", API_TOKEN, params={"limit": 1000})
    return len(answer.json())


def test_hostile_files_are_refused_and_store_nothing(plane: Plane, tmp_path: Path) -> None:
    token = plane.mint("green", "submitter")
    before = _runs(plane)
    deep = b'{"version": "0.1", "a": ' + b"[" * 1_000_000 + b"]" * 1_000_000 + b"}"
    _refused(plane.upload(token, deep, name="deep.json"), 422, "not a result file of a tool")
    _refused(plane.upload(token, deep, name="deep.json", tool="llmd"), 422, "deeper than 64")
    # A gzip bomb: ~0.5 MB on the wire, a 512 MiB member inside, past MAX_IMPORT_BYTES:
    # refused by its declared size before a byte of it is inflated into memory.
    _refused(plane.upload(token, _bomb(512 << 20), name="bomb.tgz"), 422, "bytes in the archive")
    # Names that climb out, absolute names and links: read in memory or skipped, never
    # used as paths.
    escape = tmp_path / "escaped.json"
    body = REPORT.read_bytes()
    names = [f"../../../../..{escape}", str(escape)]
    members = [_member(n, len(body)) for n in names] + [_member("link", 0, tarfile.SYMTYPE)]
    climbing = _tar(members, dict.fromkeys(names, body))
    answer = plane.upload(token, climbing, name="climb.tar")
    # Read from memory, the report in it is a report: one run, whatever its names said.
    assert answer.status_code == 201, answer.text
    assert {r["run_id"] for r in answer.json()["runs"]} == {answer.json()["runs"][0]["run_id"]}
    assert not escape.exists()
    assert "Traceback" not in answer.text
    _refused(plane.upload(token, b"\xff\xfe\x00garbage" * 100, name="x.json"), 422)
    _refused(plane.upload(token, b"{}", tool="aiperf"), 422, "aiperf")
    _refused(plane.upload(token, b"{}", tool="no-such-tool"), 422, "tool")
    _refused(plane.upload(token, b"x" * (MAX_BYTES + 1)), 413, "MAX_DATASET_BYTES")
    # The climbing archive held a real report twice: at most one run came of it.
    assert _runs(plane) - before <= 1
    assert "Traceback" not in plane.proc.text()


def _bundle(tmp_path: Path, run_id: str) -> bytes:
    db = tmp_path / f"{run_id}.duckdb"
    store_regional_run(db, run_id)
    con = connect(db, read_only=True)
    try:
        export_run(con, run_id, tmp_path / f"{run_id}.tbz", dt.datetime.now(dt.UTC))
    finally:
        con.close()
    return (tmp_path / f"{run_id}.tbz").read_bytes()


def test_a_bundle_moves_to_a_control_plane_once_and_stays_its_teams(
    plane: Plane, tmp_path: Path
) -> None:
    """A run made on a laptop, exported, imported over REST: the same run id, its rows
    once, owned by the importing team; another team may not add to it; a tampered
    bundle stores nothing."""
    body = _bundle(tmp_path, "laptop-run")
    owner, other = plane.mint("amber", "submitter"), plane.mint("teal", "submitter")
    first = plane.upload(owner, body, name="laptop-run.tbz")
    assert first.status_code == 201, first.text
    (run,) = first.json()["runs"]
    assert run["run_id"] == "laptop-run" and run["tool"] == "tokenbench" and run["added"]
    again = plane.upload(owner, body, name="laptop-run.tbz")
    assert again.status_code == 200 and not again.json()["runs"][0]["added"]
    # Another team reads it (org-wide by default) but may not add to it.
    _refused(plane.upload(other, body, name="laptop-run.tbz"), 403, "belongs to team amber")
    report = plane.call("GET", "/v1/runs/laptop-run/report?format=json", other).json()
    assert report["run_id"] == "laptop-run" and report["stages"]
    # One byte changed in a member: the checksum names it; nothing of it is stored.
    tampered = bytearray(_bundle(tmp_path, "tampered-run"))
    member = tampered.index(b"shards.parquet\0")  # its tar header; its data follows
    tampered[member + 512 + 64] ^= 0xFF
    _refused(plane.upload(owner, bytes(tampered), name="t.tbz"), 422, "shards.parquet")
    assert plane.call("GET", "/v1/runs/tampered-run", API_TOKEN).status_code == 404


def test_the_command_line_sends_a_folder_and_a_bundle_to_a_control_plane(
    plane: Plane, tmp_path: Path
) -> None:
    """``tokenbench import DIR --server``: the folder goes as a tar, each result one run;
    a bundle as it is. The answers are the control plane's."""
    import_app = typer.Typer()
    import_app.command()(import_command)
    token = plane.mint("violet", "submitter")
    folder = Path(__file__).parents[1] / "data" / "imports" / "aiperf" / "0.13.0"
    args = ["--server", plane.base, "--token", token, "--format", "json"]
    answer = CliRunner().invoke(import_app, [str(folder), *args])
    assert answer.exit_code == 0, answer.stderr
    runs = json.loads(answer.stdout)["runs"]
    assert [(r["tool"], r["requests"], r["added"]) for r in runs] == [("aiperf", 32, True)] * 2
    assert json.loads(answer.stdout)["skipped"] == ["."]
    (tmp_path / "cli-run.tbz").write_bytes(_bundle(tmp_path, "cli-run"))
    answer = CliRunner().invoke(import_app, [str(tmp_path / "cli-run.tbz"), *args])
    assert answer.exit_code == 0, answer.stderr
    assert json.loads(answer.stdout)["runs"][0]["run_id"] == "cli-run"
    listed = {r["id"]: r for r in plane.call("GET", "/v1/runs", token).json()}
    assert listed["cli-run"]["kind"] == "measured"
    assert {listed[r["run_id"]]["kind"] for r in runs} == {"imported"}
