"""Load a scenario from YAML or JSON text, turning every problem into a ScenarioError.

A ScenarioError lists each problem with its field path (``providers.0.simulate.ttft_ms``)
and, for YAML input, the line it stands on, so a user can fix the file without reading
a traceback.

Documents are untrusted (a REST body): YAML is composed by :class:`BoundedLoader`, which
counts aliases, nodes (each alias counted with everything it expands to, memoised per
anchor, so the count is linear in the document) and nesting depth while composing, and
stops at the caps of scenarios/limits.py before anything is constructed; decoded JSON is
checked against the same node and depth caps before validation.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, get_args, get_origin

import yaml
from pydantic import ValidationError
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.events import AliasEvent
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner

from scenarios.errors import BadInput
from scenarios.limits import MAX_DOCUMENT_DEPTH, MAX_DOCUMENT_NODES, MAX_YAML_ALIASES
from scenarios.model import Scenario
from scenarios.providers.kinds import AnyProvider
from scenarios.workload.spec import LengthDist


class _PyParser(Reader, Scanner, Parser):
    """PyYAML's own parser, for an installation without libyaml."""

    def __init__(self, stream: str) -> None:
        Reader.__init__(self, stream)
        Scanner.__init__(self)
        Parser.__init__(self)


try:  # libyaml's parser when installed (about 3x faster), else PyYAML's own
    from yaml._yaml import CParser as _Parser
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    _Parser = _PyParser  # type: ignore[assignment,misc]


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a scenario."""

    path: str
    message: str
    line: int | None = None

    def render(self, source: str | None = None) -> str:
        """``source:line: path: message`` with the parts that are known."""
        where = source or "scenario"
        if self.line is not None:
            where = f"{where}:{self.line}"
        field = self.path or "(top level)"
        return f"{where}: {field}: {self.message}"


class ScenarioError(BadInput, ValueError):
    """A scenario that cannot be used; ``problems`` says why, field by field."""

    def __init__(self, problems: list[Problem], source: str | None = None) -> None:
        self.problems = problems
        self.source = source
        super().__init__("\n".join(p.render(source) for p in problems))


_TOO_DEEP = f"the document is nested more than {MAX_DOCUMENT_DEPTH} levels deep"
_TOO_MANY = f"the document has more than {MAX_DOCUMENT_NODES} values (YAML aliases expanded)"


class DocumentTooLarge(yaml.YAMLError):
    """A YAML document over one of the caps (aliases, nodes, depth); raised while composing."""

    def __init__(self, message: str, line: int | None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


class _BoundedComposer(Composer):
    """PyYAML's composer, counting as it goes and stopping at the document caps.

    ``_total`` is the number of nodes composed so far with every alias expanded: a node
    adds one, an alias adds the expanded size of its anchor (memoised when the anchor's
    node was completed), so the bill of a ten-fold alias bomb is known after a few events,
    before it is ever expanded. ``_heights`` holds, per open node, the height of its
    deepest child so far; depth is checked at each node and at each alias (the alias's
    subtree height added to where it is used).
    """

    def __init__(self) -> None:
        super().__init__()
        self._total = 0
        self._aliases = 0
        self._heights: list[int] = []
        self._anchored: dict[int, tuple[int, int]] = {}  # id(node) -> (size, height)

    if TYPE_CHECKING:  # provided by the parser this composer is mixed with

        def check_event(self, *choices: type[yaml.Event]) -> bool: ...
        def peek_event(self) -> yaml.Event: ...

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        """Compose one node (or resolve one alias) within the caps."""
        if self.check_event(AliasEvent):
            event = self.peek_event()
            self._aliases += 1
            if self._aliases > MAX_YAML_ALIASES:
                self._refuse(event, f"the document uses more than {MAX_YAML_ALIASES} YAML aliases")
            node = super().compose_node(parent, index)
            memo = self._anchored.get(id(node))
            if memo is None:  # its anchor is still open: the alias is inside itself
                self._refuse(event, "a YAML alias is used inside its own anchor (recursive)")
            self._add(event, *memo)
            return node
        event = self.peek_event()
        if len(self._heights) >= MAX_DOCUMENT_DEPTH:
            self._refuse(event, _TOO_DEEP)
        anchor = getattr(event, "anchor", None)  # node events carry one
        self._heights.append(0)
        before = self._total
        node = super().compose_node(parent, index)
        height = self._heights.pop() + 1
        self._add(event, 1, height)
        if anchor is not None and node is not None:
            self._anchored[id(node)] = (self._total - before, height)
        return node

    def _add(self, event: yaml.Event, size: int, height: int) -> None:
        self._total += size
        if self._total > MAX_DOCUMENT_NODES:
            self._refuse(event, _TOO_MANY)
        if self._heights:
            self._heights[-1] = max(self._heights[-1], height)
            if len(self._heights) + height > MAX_DOCUMENT_DEPTH:
                self._refuse(event, _TOO_DEEP)

    @staticmethod
    def _refuse(event: yaml.Event, message: str) -> NoReturn:
        mark = event.start_mark
        raise DocumentTooLarge(message, mark.line + 1 if mark is not None else None)


class BoundedLoader(_BoundedComposer, _Parser, SafeConstructor, Resolver):
    """Safe YAML loading under the document caps (the counting composer over the parser)."""

    def __init__(self, stream: str) -> None:
        _Parser.__init__(self, stream)
        _BoundedComposer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)


def read_yaml(text: str, source: str | None = None) -> tuple[Any, dict[tuple[str, ...], int]]:
    """Decode YAML (or JSON) text under the document caps: the data, and the line of each
    path in it. Any problem, a cap included, is a ScenarioError naming the line."""
    loader = BoundedLoader(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except DocumentTooLarge as exc:
        raise ScenarioError([Problem("", exc.message, exc.line)], source) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        message = f"not valid YAML/JSON: {exc}"
        if "maximum nesting depth" in str(exc):  # libyaml's own cap, above ours
            message = _TOO_DEEP
        raise ScenarioError([Problem("", message, line)], source) from None
    except RecursionError:  # a parser without its own depth cap; never expected here
        raise ScenarioError([Problem("", _TOO_DEEP)], source) from None
    except (ValueError, TypeError, OverflowError) as exc:
        # A scalar its tag cannot hold (a 5000-digit int, month 13, '!!int x').
        problem = Problem("", f"not valid YAML/JSON: {_first_line(exc)}")
        raise ScenarioError([problem], source) from None
    finally:
        loader.dispose()
    return data, (_line_index(node) if node is not None else {})


def _first_line(exc: BaseException) -> str:
    text = str(exc)
    return text.splitlines()[0][:200] if text else type(exc).__name__


def check_document(data: Any, source: str | None = None) -> None:
    """Refuse decoded data (e.g. a JSON body) over the document caps: more than
    MAX_DOCUMENT_NODES values (keys included) or nested deeper than MAX_DOCUMENT_DEPTH.
    Iterative, so deep data cannot exhaust the stack."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    nodes = 0
    while stack:
        value, depth = stack.pop()
        nodes += 1
        if nodes > MAX_DOCUMENT_NODES:
            raise ScenarioError([Problem("", _TOO_MANY)], source)
        if depth > MAX_DOCUMENT_DEPTH:
            raise ScenarioError([Problem("", _TOO_DEEP)], source)
        if isinstance(value, dict):
            nodes += len(value)  # the keys
            stack.extend((item, depth + 1) for item in value.values())
        elif isinstance(value, list | tuple):
            stack.extend((item, depth + 1) for item in value)


def parse_scenario(text: str, source: str | None = None) -> Scenario:
    """Parse YAML (a superset of JSON) text into a validated Scenario."""
    data, lines = read_yaml(text, source)
    return validate_scenario(data, source, lines)


def validate_scenario(
    data: Any, source: str | None = None, lines: dict[tuple[str, ...], int] | None = None
) -> Scenario:
    """Validate already-decoded data (a dict from JSON, YAML or a REST body)."""
    if not isinstance(data, dict):
        raise ScenarioError([Problem("", "a scenario must be a mapping of keys to values")], source)
    check_document(data, source)
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(problems_from_validation(exc, lines or {}), source) from None


def load_document(path: str | Path) -> tuple[Any, dict[tuple[str, ...], int]]:
    """Read a scenario file (``.yaml``, ``.yml`` or ``.json``) into decoded data and the
    line of each key path (empty for JSON), unvalidated."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError([Problem("", f"cannot read file: {exc.strerror}")], str(file)) from None
    if file.suffix == ".json":
        try:
            return json.loads(text), {}
        except json.JSONDecodeError as exc:
            problem = Problem("", f"not valid JSON: {exc.msg}", exc.lineno)
            raise ScenarioError([problem], str(file)) from None
        except RecursionError:
            raise ScenarioError([Problem("", _TOO_DEEP)], str(file)) from None
    return read_yaml(text, str(file))


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file (``.yaml``, ``.yml`` or ``.json``)."""
    data, lines = load_document(path)
    return validate_scenario(data, str(path), lines)


def problems_from_validation(
    exc: ValidationError, lines: dict[tuple[str, ...], int]
) -> list[Problem]:
    """Turn pydantic errors into Problems with dotted paths (and lines where known)."""
    problems = []
    for error in exc.errors(include_url=False):
        loc = _user_path(error["loc"])
        if error["type"] in ("union_tag_invalid", "union_tag_not_found"):
            # Point at the discriminator key itself (e.g. providers.1.kind).
            loc = (*loc, str(error.get("ctx", {}).get("discriminator", "")).strip("'"))
        problems.append(Problem(".".join(loc), error["msg"], _nearest_line(loc, lines)))
    return problems


# Discriminated unions add the chosen tag to an error's location (providers.0.simulated.x);
# users never wrote that part, so it is dropped from the path they see.
_UNION_FIELDS = {"prompt_tokens", "output_tokens"}


def _union_members(union: object) -> tuple[Any, ...]:
    """Member models of a (possibly Annotated) union."""
    inner = get_args(union)[0] if get_origin(union) is Annotated else union
    return get_args(inner)


_UNION_TAGS = {
    tag
    for union in (AnyProvider, LengthDist)
    for member in _union_members(union)
    for name in ("kind", "dist")
    if name in member.model_fields
    for tag in get_args(member.model_fields[name].annotation)
}


def _user_path(loc: tuple[int | str, ...]) -> tuple[str, ...]:
    parts: list[str] = []
    previous: int | str | None = None
    for part in loc:
        is_tag = part in _UNION_TAGS and (isinstance(previous, int) or previous in _UNION_FIELDS)
        if not is_tag:
            parts.append(str(part))
        previous = part
    return tuple(parts)


def _nearest_line(loc: tuple[str, ...], lines: dict[tuple[str, ...], int]) -> int | None:
    """Line of the deepest part of ``loc`` that exists in the file (missing keys have none)."""
    for depth in range(len(loc), -1, -1):
        line = lines.get(loc[:depth])
        if line is not None:
            return line
    return None


def _line_index(node: yaml.Node) -> dict[tuple[str, ...], int]:
    """Map each path in the YAML document to the 1-based line where its value starts."""
    index: dict[tuple[str, ...], int] = {}

    def walk(current: yaml.Node, path: tuple[str, ...]) -> None:
        index[path] = current.start_mark.line + 1
        if isinstance(current, yaml.MappingNode):
            for key_node, value_node in current.value:
                key_path = (*path, str(key_node.value))
                walk(value_node, key_path)
                # A key's own line is the better pointer for errors on that key.
                index[key_path] = key_node.start_mark.line + 1
        elif isinstance(current, yaml.SequenceNode):
            for position, item in enumerate(current.value):
                walk(item, (*path, str(position)))

    walk(node, ())
    return index
