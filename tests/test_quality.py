"""The layout of the tests themselves, and citations that stay inside the repository.
The static checks (ruff, mypy, the layering contracts) are not tests: `infra/static-checks`
runs them, as a step of `.ci/run` of its own."""

from __future__ import annotations

import ast
import itertools
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


# Built from parts so this file does not match its own check.
_OUTSIDE_CITATIONS = ("DOMAIN" + " §", "DOMAIN" + ".md", "../" + "shared")


def test_no_citations_outside_the_repository() -> None:
    """Every definition a comment or doc cites lives in docs/, not in a file outside the repo."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True, timeout=60
    )
    offenders = []
    for name in listed.stdout.decode().split("\0"):
        path = REPO / name
        if not name or not path.is_file():
            continue
        text = path.read_bytes().decode("utf-8", errors="replace")
        offenders += [f"{name}: {cite}" for cite in _OUTSIDE_CITATIONS if cite in text]
    assert not offenders, "\n".join(offenders)


# ------------------------------------------------------------------------ the tests' own layout

TESTS = REPO / "tests"
UNIT = TESTS / "unit"
SOURCE_PACKAGES = ("api", "workers", "analytics", "scenarios")
# What any file under tests/ may import of tests/: fixtures (conftest), fake servers, builders.
SHARED_TEST_PACKAGES = ("fakes", "support")

# Source modules no test imports (empty: every module is). Kept as the one place to owe a
# test while one is written; the check fails when a listed module becomes imported.
NOT_YET_IMPORTED: frozenset[str] = frozenset()

# `python -m X` written as one string, as in a docstring or a shell line.
_PYTHON_M = re.compile(r"python -m ([\w.]+)")
# Code a test runs in a fresh interpreter (`python -c "..."`, a child's script): its
# `import X` / `from X import` lines, at the start of a line or after a `;`.
_CHILD_IMPORT = re.compile(
    r"(?:^|;|\n)\s*(?:import|from)\s+((?:api|workers|analytics|scenarios)[\w.]*)"
)


def _module_name(path: Path) -> str:
    """The dotted name of a .py file under the repository (a package is its __init__)."""
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _test_modules() -> list[Path]:
    return sorted(path for path in TESTS.rglob("test_*.py") if path.is_file())


def _imported_names(path: Path) -> set[str]:
    """Every dotted name an import statement of this file names: for ``from m import x``
    both ``m`` and ``m.x`` (x may be a submodule). Relative imports are resolved."""
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package.pop()
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            names.add(module)
            names |= {f"{module}.{alias.name}" for alias in node.names}
    return names


def _started_modules(path: Path) -> set[str]:
    """Modules a test starts as a process: ``"-m", "X"`` in a list, ``python -m X``, or
    imported by code the test runs in a child interpreter."""
    started: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.List | ast.Tuple):
            items = node.elts
            for flag, value in itertools.pairwise(items):
                if (
                    isinstance(flag, ast.Constant)
                    and flag.value == "-m"
                    and isinstance(value, ast.Constant)
                    and isinstance(value.value, str)
                ):
                    started.add(value.value)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            started |= set(_PYTHON_M.findall(node.value))
            started |= set(_CHILD_IMPORT.findall(node.value))
    # Running a package runs its __main__.
    return started | {f"{name}.__main__" for name in started}


def _is_shared(name: str) -> bool:
    """Whether a dotted name under tests/ may be imported by a test module."""
    parts = name.split(".")
    return (
        parts[0] != "tests"
        or "conftest" in parts
        or (len(parts) > 1 and parts[1] in SHARED_TEST_PACKAGES)
    )


def test_no_test_module_imports_another() -> None:
    """Builders shared by tests live in tests/support (fake servers in tests/fakes)."""
    offenders = []
    for path in sorted(TESTS.rglob("*.py")):
        for name in sorted(_imported_names(path)):
            # ``from tests.unit import x`` names the package tests.unit and tests.unit.x:
            # only the latter says what is imported.
            if not _is_shared(name) and not (REPO / name.replace(".", "/")).is_dir():
                offenders.append(f"{path.relative_to(REPO)} imports {name}")
    assert not offenders, "\n".join(offenders)


def test_unit_tests_mirror_the_source() -> None:
    """tests/unit/<package>/.../test_<module>.py sits in the mirror of a source package."""
    offenders = []
    for path in sorted(UNIT.rglob("*.py")):
        relative = path.relative_to(UNIT)
        if path.name in {"__init__.py", "conftest.py"}:
            continue
        source = REPO / relative.parent
        if not path.name.startswith("test_"):
            offenders.append(f"{relative}: not a test module (shared code goes to tests/support)")
        elif relative.parts[0] not in SOURCE_PACKAGES or not (source / "__init__.py").is_file():
            offenders.append(f"{relative}: not in the mirror of a source package")
        # Test modules are packages' modules: their basenames repeat across directories.
        missing = [
            str(folder.relative_to(TESTS))
            for folder in (path.parent, *path.parent.parents)
            if folder.is_relative_to(UNIT) and not (folder / "__init__.py").is_file()
        ]
        offenders += [f"{relative}: {folder}/ has no __init__.py" for folder in missing]
    assert not offenders, "\n".join(sorted(set(offenders)))


def test_every_source_module_is_imported_by_a_test() -> None:
    """Each module of the four packages (a non-empty __init__ included) is imported by a test
    module, or started by one as a process; NOT_YET_IMPORTED lists the ones still owed."""
    modules = {
        _module_name(path)
        for package in SOURCE_PACKAGES
        for path in (REPO / package).rglob("*.py")
        if path.name != "__init__.py" or path.read_text(encoding="utf-8").strip()
    }
    reached: set[str] = set()
    for path in _test_modules():
        reached |= _imported_names(path) | _started_modules(path)
    untested = modules - reached
    unlisted = sorted(untested - NOT_YET_IMPORTED)
    stale = sorted(NOT_YET_IMPORTED - untested)
    assert not unlisted, f"no test imports these modules: {unlisted}"
    assert not stale, f"remove from NOT_YET_IMPORTED (now imported, or gone): {stale}"
