"""Load a scenario from YAML or JSON text, turning every problem into a ScenarioError.

A ScenarioError lists each problem with its field path (``providers.0.simulate.ttft_ms``)
and, for YAML input, the line it stands on, so a user can fix the file without reading
a traceback.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, get_args, get_origin

import yaml
from pydantic import ValidationError

from scenarios.model import AnyProvider, LengthDist, Scenario


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


class ScenarioError(ValueError):
    """A scenario that cannot be used; ``problems`` says why, field by field."""

    def __init__(self, problems: list[Problem], source: str | None = None) -> None:
        self.problems = problems
        self.source = source
        super().__init__("\n".join(p.render(source) for p in problems))


def parse_scenario(text: str, source: str | None = None) -> Scenario:
    """Parse YAML (a superset of JSON) text into a validated Scenario."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise ScenarioError([Problem("", f"not valid YAML/JSON: {exc}", line)], source) from None
    lines = _line_index(node) if node is not None else {}
    return validate_scenario(data, source, lines)


def validate_scenario(
    data: Any, source: str | None = None, lines: dict[tuple[str, ...], int] | None = None
) -> Scenario:
    """Validate already-decoded data (a dict from JSON, YAML or a REST body)."""
    if not isinstance(data, dict):
        raise ScenarioError([Problem("", "a scenario must be a mapping of keys to values")], source)
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(problems_from_validation(exc, lines or {}), source) from None


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file (``.yaml``, ``.yml`` or ``.json``)."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError([Problem("", f"cannot read file: {exc.strerror}")], str(file)) from None
    if file.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            problem = Problem("", f"not valid JSON: {exc.msg}", exc.lineno)
            raise ScenarioError([problem], str(file)) from None
        return validate_scenario(data, str(file))
    return parse_scenario(text, str(file))


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
