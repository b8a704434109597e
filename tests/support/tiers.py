"""How the suite is split, ordered and run in parallel (CONTRIBUTING.md, "Tests").

Markers:

- ``integration``: starts real Redis, Celery workers or HTTP endpoints. Every test under
  ``tests/integration/``, ``tests/security/`` and ``tests/faults/`` has it (given here by
  directory, so a new file there cannot be left out of the marker); when the ``-m``
  expression leaves integration tests out, those directories are not even imported
  (the fuzz module alone builds its schemathesis cases for ~20 s of CPU at collection).
- ``slow``: takes seconds without real services.
- ``serial``: measures timing, CPU or memory. Under pytest-xdist such a test never runs
  beside another test: each test holds a shared lock and a serial test an exclusive one
  (with a turnstile, so a waiting serial test is not starved), and serial tests are
  queued last, one after another on one worker, so the others have drained by then.

Distribution (``--dist loadgroup``): the tests of one module stay together on one worker
and in their order (module fixtures are set up once; a few modules rely on their order),
serial tests form one group of their own. Modules with real services go first, so that
the long ones start early and the short unit modules fill the gaps at the end.
"""

from __future__ import annotations

import fcntl
import itertools
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _pytest.mark.expression import Expression

try:  # pytest 9: a node's id is a NodeId
    from _pytest.nodeid import NodeId
except ImportError:  # pragma: no cover - pytest 8 reads the id xdist sets
    NodeId = None  # type: ignore[assignment,misc]

TESTS = Path(__file__).resolve().parent.parent
# Directories whose every test starts real services.
INTEGRATION_DIRS = ("integration", "security", "faults", "browser")
# Directories whose tests form one xdist group of their own: they share one stack (the
# browser tests: a control plane, a worker and a Chromium, started once).
GROUPED_DIRS = ("browser",)
# Workers for ``-n auto``: most integration tests wait on runs and processes, so two per
# core keep the cores busy; TOKENBENCH_TEST_WORKERS overrides (``-n 0`` runs in-process).
WORKERS_PER_CORE = 2
MAX_AUTO_WORKERS = 8
LOCK_KEY = "tokenbench_serial_lock_dir"
_WORDS = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _top_dir(path: Path) -> str:
    """The first part of ``path`` under tests/ (a directory there, or the path itself)."""
    try:
        parts = path.resolve().relative_to(TESTS).parts
    except ValueError:
        return ""
    return parts[0] if parts else ""


def _in_integration_dir(path: Path) -> bool:
    return _top_dir(path) in INTEGRATION_DIRS


def _never_selects_integration(markexpr: str) -> bool:
    """True if ``-m markexpr`` deselects every test marked ``integration``, whatever other
    markers it has (the expression is tried with each combination of its other names)."""
    if not markexpr or "(" in markexpr:  # marker keyword arguments: not worth guessing
        return False
    expression = Expression.compile(markexpr)
    others = sorted(set(_WORDS.findall(markexpr)) - {"and", "or", "not", "integration"})
    for values in itertools.product((False, True), repeat=len(others)):
        marked = {"integration", *(n for n, v in zip(others, values, strict=True) if v)}
        if expression.evaluate(lambda name, marked=marked, **_: name in marked):
            return False
    return True


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if _in_integration_dir(collection_path) and _never_selects_integration(
        str(config.option.markexpr or "")
    ):
        return True
    return None


@pytest.hookimpl(tryfirst=True)  # before xdist reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _in_integration_dir(item.path):
            item.add_marker(pytest.mark.integration)
        if _top_dir(item.path) == "browser":
            item.add_marker(pytest.mark.browser)
        if item.get_closest_marker("serial") is not None:
            item.add_marker(pytest.mark.xdist_group("serial"))
        elif _top_dir(item.path) in GROUPED_DIRS:
            item.add_marker(pytest.mark.xdist_group(_top_dir(item.path)))
        else:
            item.add_marker(pytest.mark.xdist_group(item.path.relative_to(TESTS).as_posix()))

    def rank(item: pytest.Item) -> int:
        if item.get_closest_marker("serial") is not None:
            return 2
        return 0 if item.get_closest_marker("integration") is not None else 1

    items.sort(key=rank)  # stable: each module's order is kept


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    wanted = os.environ.get("TOKENBENCH_TEST_WORKERS")
    if wanted:
        return int(wanted)
    return min(MAX_AUTO_WORKERS, WORKERS_PER_CORE * (os.cpu_count() or 1))


class _GroupIds:
    """Make pytest-xdist's ``loadgroup`` group again under pytest 9.

    xdist (3.8) appends ``@group`` to ``item._nodeid`` on each worker, and its scheduler
    groups the ids the workers report; pytest 9 builds ``item.nodeid`` from ``item._id``
    instead, so every group was lost (each test went to any worker, and a module's
    fixtures were set up on every worker its tests landed on, with other modules' tests
    run between them). After xdist's hook, the suffixed id is made the item's id."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            grouped: str | None = getattr(item, "_nodeid", None)
            if NodeId is not None and grouped and grouped != item.nodeid:
                # The whole id after the path as one name: rebuilt or cached, it reads
                # back as xdist wrote it (params parsed apart would move its "]").
                path, _, rest = grouped.partition("::")
                item._id = NodeId(path=path, names=(rest,))


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput") and config.getvalue("loadgroup"):
        config.pluginmanager.register(_GroupIds(), "tokenbench-xdist-group-ids")
    if not hasattr(config, "workerinput") and getattr(config.option, "numprocesses", None):
        config.stash[_lock_dir] = tempfile.mkdtemp(prefix="tokenbench-serial-")


def pytest_unconfigure(config: pytest.Config) -> None:
    lock_dir = config.stash.get(_lock_dir, None)
    if lock_dir is not None:
        shutil.rmtree(lock_dir, ignore_errors=True)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    node.workerinput[LOCK_KEY] = node.config.stash[_lock_dir]


_lock_dir = pytest.StashKey[str]()


@pytest.hookimpl(hookwrapper=True, tryfirst=True)  # outside pytest-timeout's timer
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    workerinput: dict[str, Any] | None = getattr(item.config, "workerinput", None)
    if workerinput is None or LOCK_KEY not in workerinput:
        yield  # one process: nothing runs beside anything
        return
    lock_dir = Path(workerinput[LOCK_KEY])
    serial = item.get_closest_marker("serial") is not None
    with (lock_dir / "turnstile").open("a") as turnstile, (lock_dir / "tests").open("a") as tests:
        # A serial test holds the turnstile while it waits and runs: no new test starts.
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        fcntl.flock(tests, fcntl.LOCK_EX if serial else fcntl.LOCK_SH)
        if not serial:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(tests, fcntl.LOCK_UN)
            if serial:
                fcntl.flock(turnstile, fcntl.LOCK_UN)
