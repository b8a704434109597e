"""Every citation a document makes leads somewhere: the `docs/...` pages and relative links
of README.md, CONTRIBUTING.md, infra/README.md and docs/*.md exist, and so do the `docs/`
pages the source's docstrings and comments name; the repository paths (`workers/...`,
`api.rest.offload`) those documents and the source's ``docstrings`` cite in backticks
exist; every `tokenbench COMMAND` the documents show is a command of the CLI. Pure file reading (and the typer app, imported): no
process is started."""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from pathlib import Path

import typer
import typer.main

from api.cli.app import app

REPO = Path(__file__).resolve().parent.parent
SOURCE_PACKAGES = ("api", "workers", "analytics", "scenarios")
# Top-level folders whose paths a document may cite as `folder/...`.
PATH_ROOTS = (*SOURCE_PACKAGES, "infra", "tests", "benchmarks")


def _documents() -> list[Path]:
    docs = sorted((REPO / "docs").glob("*.md"))
    return [REPO / "README.md", REPO / "CONTRIBUTING.md", REPO / "infra" / "README.md", *docs]


def _source_files() -> list[Path]:
    return sorted(path for package in SOURCE_PACKAGES for path in (REPO / package).rglob("*.py"))


def _where(path: Path) -> str:
    return str(path.relative_to(REPO))


# ------------------------------------------------------------------------ reading a document

_FENCE = re.compile(r"^```.*?^```[ \t]*$", re.MULTILINE | re.DOTALL)
_INLINE_CODE = re.compile(r"`([^`\n]+)`")


def _fenced_blocks(text: str) -> list[str]:
    return _FENCE.findall(text)


def _inline_code(text: str) -> list[str]:
    """The contents of single-backtick spans, outside fenced code blocks."""
    return _INLINE_CODE.findall(_FENCE.sub("", text))


# ------------------------------------------------------------------------ (a) docs pages, links

# A `docs/NAME.md` path not inside another path (`foo/docs/x.md` is someone else's).
_DOCS_PAGE = re.compile(r"(?<![\w./-])docs/[\w./-]*?\.md\b")
# [text](target): a markdown link; images too.
_LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")


def _docs_pages_cited(text: str) -> set[str]:
    return set(_DOCS_PAGE.findall(text))


def _relative_links(text: str) -> Iterator[str]:
    for target in _LINK.findall(_FENCE.sub("", text)):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL (http:, mailto:) or an anchor of the same page
        yield target.split("#", 1)[0]


def test_every_cited_docs_page_exists() -> None:
    broken = [
        f"{_where(path)}: {page}"
        for path in [*_documents(), *_source_files()]
        for page in sorted(_docs_pages_cited(path.read_text(encoding="utf-8")))
        if not (REPO / page).is_file()
    ]
    assert not broken, "\n".join(broken)


def test_every_relative_link_leads_to_a_file() -> None:
    broken = [
        f"{_where(path)}: ({target})"
        for path in _documents()
        for target in _relative_links(path.read_text(encoding="utf-8"))
        if not (path.parent / target).exists()
    ]
    assert not broken, "\n".join(broken)


def test_the_docs_index_lists_every_page() -> None:
    index = (REPO / "docs" / "index.md").read_text(encoding="utf-8")
    listed = {target for target in _relative_links(index) if "/" not in target}
    pages = {path.name for path in (REPO / "docs").glob("*.md")}
    assert pages == listed, (
        f"not listed: {sorted(pages - listed)}; no such page: {sorted(listed - pages)}"
    )


# ------------------------------------------------------------------------ (b) repository paths

# `workers/client/prewarm.py`, `api/cli/`, `infra/refresh-constraints`: no placeholders
# (`<module>`, `...`, `*`), so only what is written as a real path is checked.
_REPO_PATH = re.compile(rf"(?:{'|'.join(PATH_ROOTS)})/[\w./-]*")
# `api.rest.offload`, `workers.client.prewarm.prewarm`: a dotted name in one of the packages.
_DOTTED = re.compile(rf"(?:{'|'.join(SOURCE_PACKAGES)})(?:\.\w+)+")


def _path_tokens(code: str) -> Iterator[str]:
    """The words of a code span or block that are written as repository paths."""
    for raw in code.split():
        word = raw.lstrip("@(\"'").rstrip(",;:)\"'")
        if _REPO_PATH.fullmatch(word) and ".." not in word:
            yield word


def _module_file(parts: list[str]) -> Path | None:
    """The file of the module (or package) named by ``parts``, if there is one."""
    base = REPO.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@functools.cache
def _top_level_names(module: Path) -> dict[str, ast.AST]:
    """The names a module defines at its top level (functions, classes, assignments, imports)."""
    names: dict[str, ast.AST] = {}
    for node in ast.parse(module.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names[node.name] = node
        elif isinstance(node, ast.Assign):
            names |= {t.id: node for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0]: node for a in node.names}
    return names


def _dotted_exists(name: str) -> bool:
    """A module, or a name a module defines (one level into a class for its methods)."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        module = _module_file(parts[:cut])
        if module is None:
            continue
        rest = parts[cut:]
        if not rest:
            return True
        defined = _top_level_names(module).get(rest[0])
        if defined is None or len(rest) > 2:
            return False
        if len(rest) == 2 and isinstance(defined, ast.ClassDef):
            return any(
                getattr(node, "name", None) == rest[1]
                or (isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == rest[1])
                for node in defined.body
            )
        return True
    return False


def _looks_like_a_module(name: str) -> bool:
    """`api.rest.offload` is cited as code; `api.tokens` is a settings path
    (TOKENBENCH__API__TOKENS), not a module: a dotted name counts as a citation of code
    when its first two parts are a package and a module or package in it."""
    return (
        _module_file(name.split(".")[:2]) is not None
        or (REPO / Path(*name.split(".")[:2])).is_dir()
    )


def test_every_cited_repository_path_exists() -> None:
    broken = []
    for path in _documents():
        text = path.read_text(encoding="utf-8")
        for code in [*_inline_code(text), *_fenced_blocks(text)]:
            broken += [
                f"{_where(path)}: {cited}"
                for cited in _path_tokens(code)
                if not (REPO / cited).exists()
            ]
    assert not broken, "\n".join(broken)


# ``workers/shard/run_spec.py`` in a docstring or comment: reStructuredText's double backticks.
_RST_CODE = re.compile(r"``([^`\n]+)``")


def test_every_path_the_source_cites_exists() -> None:
    broken = [
        f"{_where(path)}: {cited}"
        for path in _source_files()
        for code in _RST_CODE.findall(path.read_text(encoding="utf-8"))
        for cited in _path_tokens(code)
        if not (REPO / cited).exists()
    ]
    assert not broken, "\n".join(broken)


def test_every_cited_module_exists() -> None:
    broken = []
    for path in _documents():
        for code in _inline_code(path.read_text(encoding="utf-8")):
            name = code.strip().removesuffix("()")
            if _DOTTED.fullmatch(name) and _looks_like_a_module(name) and not _dotted_exists(name):
                broken.append(f"{_where(path)}: {name}")
    assert not broken, "\n".join(broken)


# ------------------------------------------------------------------------ (c) commands

_SHOWN_COMMAND = re.compile(r"(?:^|[\s;&(])tokenbench\s+([a-z][\w|\\-]*)(?:\s+([a-z][\w|\\-]*))?")


@functools.cache
def _cli_commands() -> dict[str, frozenset[str]]:
    """Each command of the CLI, with its subcommands (empty for a plain command); read
    through the group's own listing, so a lazily loaded command counts too."""
    group = typer.main.get_command(app)
    context = typer.Context(group)
    commands: dict[str, frozenset[str]] = {}
    for name in group.list_commands(context):  # type: ignore[attr-defined]
        command = group.get_command(context, name)  # type: ignore[attr-defined]
        sub: frozenset[str] = frozenset()
        if hasattr(command, "list_commands"):
            sub = frozenset(command.list_commands(typer.Context(command)))
        commands[name] = sub
    return commands


def _alternatives(word: str) -> list[str]:
    """`pause\\|resume\\|delete` (a table cell) or `report|sql`: each one."""
    return [w for w in word.replace("\\", "").split("|") if w]


def _unknown_commands(code: str) -> Iterator[str]:
    commands = _cli_commands()
    for line in code.splitlines():
        for first, second in _SHOWN_COMMAND.findall(line):
            for name in _alternatives(first):
                if name not in commands:
                    yield f"tokenbench {name}"
                elif commands[name] and second:
                    yield from (
                        f"tokenbench {name} {sub}"
                        for sub in _alternatives(second)
                        if sub not in commands[name]
                    )


def test_the_cli_lists_its_commands() -> None:
    """The listing the next test checks against is the real one (not empty, groups seen)."""
    commands = _cli_commands()
    assert {"run", "report", "serve", "worker"} <= set(commands)
    assert "create" in commands["schedule"] and "check" in commands["providers"]


def test_every_shown_command_exists() -> None:
    broken = []
    for path in _documents():
        text = path.read_text(encoding="utf-8")
        for code in [*_inline_code(text), *_fenced_blocks(text)]:
            broken += [f"{_where(path)}: `{shown}`" for shown in _unknown_commands(code)]
    assert not broken, "\n".join(sorted(set(broken)))


def test_the_checks_see_a_broken_citation() -> None:
    """Each detector finds what it is for in a made-up page, so a check that passes is
    one that looked (a pattern that matched nothing would pass every time)."""
    page = (
        "See `docs/no-such-page.md` and [x](no-such.md); run `tokenbench frobnicate` or\n"
        "`tokenbench schedule explode ID`; the code is in `workers/no_such.py` and\n"
        "`api.cli.no_such_module`; `api.tokens` is a setting and `api.groq.com` a host.\n"
        "```bash\ntokenbench run scenarios/examples/no-such.yaml\n```\n"
    )
    assert _docs_pages_cited(page) == {"docs/no-such-page.md"}
    assert list(_relative_links(page)) == ["no-such.md"]
    codes = [*_inline_code(page), *_fenced_blocks(page)]
    paths = [cited for code in codes for cited in _path_tokens(code)]
    assert paths == ["workers/no_such.py", "scenarios/examples/no-such.yaml"]
    dotted = [c for c in _inline_code(page) if _DOTTED.fullmatch(c) and _looks_like_a_module(c)]
    assert dotted == ["api.cli.no_such_module"] and not _dotted_exists(dotted[0])
    assert _dotted_exists("api.cli.app.main") and _dotted_exists("workers.client.prewarm")
    shown = [bad for code in codes for bad in _unknown_commands(code)]
    assert shown == ["tokenbench frobnicate", "tokenbench schedule explode"]
