"""Asking a child process of our own to do untrusted work: one request in, one answer out.

The parents that parse what a submitter sent (a dataset to convert, another tool's result
files, a run bundle) run ``python -m MODULE`` with one JSON header line and the bytes on
its stdin; the child caps its own memory first thing, does the work and answers one JSON
line on stdout, followed by a payload. ``ask_child`` is the parent's side, one way for
all: a child that outlives its time is killed (``subprocess.run`` kills and reaps it),
and one that dies without an answer is reported with the last line it wrote on stderr,
so the caller turns either into its own refusal.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from scenarios.limits import cap_data_memory

__all__ = ["ChildAnswer", "ChildFailed", "ask_child", "read_request"]


class ChildFailed(Exception):
    """The child took too long or ended without an answer; ``reason`` says which."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class ChildAnswer:
    """The child's JSON answer line and the bytes it wrote after it."""

    answer: dict[str, Any]
    payload: bytes


def ask_child(
    module: str, header: dict[str, Any], data: bytes, timeout_s: float, doing: str
) -> ChildAnswer:
    """Run ``python -m module`` with ``header`` (one JSON line) and ``data`` on stdin;
    its answer. ChildFailed names ``doing`` ("converting the file") when the child
    outlived ``timeout_s`` or ended without a JSON answer line."""
    try:
        child = subprocess.run(
            [sys.executable, "-m", module],
            input=json.dumps(header).encode() + b"\n" + data,
            capture_output=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ChildFailed(f"{doing} took longer than {timeout_s:.0f} s: refused") from None
    line, _, payload = child.stdout.partition(b"\n")
    try:
        answer = json.loads(line)
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        tail = child.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no answer"]
        raise ChildFailed(
            f"{doing} failed (its process ended with {child.returncode}: {tail[0][:300]})"
        )
    return ChildAnswer(answer, payload)


def read_request(default_memory_bytes: int) -> tuple[dict[str, Any], bytes]:
    """The child's side: cap this process's memory (``default_memory_bytes`` before a
    byte is read, then the header's ``memory_bytes``), and return the header and the
    bytes after it from stdin."""
    cap_data_memory(default_memory_bytes)
    line, _, data = sys.stdin.buffer.read().partition(b"\n")
    header: dict[str, Any] = json.loads(line)
    cap_data_memory(int(header.get("memory_bytes", default_memory_bytes)))
    return header, data
