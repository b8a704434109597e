"""Reading an untrusted JSON, JSONL or YAML result file, with where it went wrong.

Every importer reads its files through these, so every file is bounded the same way:
nesting (``MAX_IMPORT_JSON_DEPTH``), and an error names the file and the line (JSONL,
JSON syntax) or the field. ``field`` and ``need_*`` give an importer one way to read a
nested value and say which one is missing or of the wrong type.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from typing import Any

import yaml

from analytics.imports.errors import ImportFormatError
from scenarios.limits import MAX_IMPORT_JSON_DEPTH, MAX_IMPORT_TEXT_CHARS

__all__ = [
    "depth_of",
    "iter_jsonl",
    "load_json",
    "load_yaml",
    "need_dict",
    "need_list",
    "need_number",
    "opt_count",
    "opt_number",
    "opt_text",
]


def depth_of(value: Any) -> int:
    """Nesting depth of a parsed document: the most objects and lists one value is inside,
    itself included (a scalar is 0, ``[]`` 1, ``[[1]]`` 2); without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth + 1)
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return deepest


def _checked(value: Any, where: str) -> Any:
    if depth_of(value) > MAX_IMPORT_JSON_DEPTH:
        raise ImportFormatError(f"nested deeper than {MAX_IMPORT_JSON_DEPTH} levels", where)
    return value


def load_json(data: bytes, name: str) -> Any:
    """The JSON document in ``data``; ImportFormatError with the line and column of a
    syntax error, or when nested too deep."""
    try:
        return _checked(json.loads(data), name)
    except json.JSONDecodeError as exc:
        raise ImportFormatError(f"not JSON: {exc.msg}", f"{name} line {exc.lineno}") from None
    except RecursionError:
        raise ImportFormatError(
            f"nested deeper than {MAX_IMPORT_JSON_DEPTH} levels", name
        ) from None
    except UnicodeDecodeError:
        raise ImportFormatError("not UTF-8 text", name) from None


def iter_jsonl(data: bytes, name: str) -> Iterator[tuple[int, Any]]:
    """(line number, document) of each non-blank line of a JSONL file."""
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{name} line {number}"
        try:
            yield number, _checked(json.loads(line), where)
        except json.JSONDecodeError as exc:
            raise ImportFormatError(f"not JSON: {exc.msg}", where) from None
        except RecursionError:
            raise ImportFormatError(
                f"nested deeper than {MAX_IMPORT_JSON_DEPTH} levels", where
            ) from None
        except UnicodeDecodeError:
            raise ImportFormatError("not UTF-8 text", where) from None


def load_yaml(data: bytes, name: str) -> Any:
    """The YAML document in ``data`` (safe loader: no tags, no objects)."""
    try:
        return _checked(yaml.safe_load(data), name)
    except yaml.MarkedYAMLError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark else None
        where = f"{name} line {line}" if line else name
        raise ImportFormatError(f"not YAML: {exc.problem}", where) from None
    except (yaml.YAMLError, RecursionError):
        raise ImportFormatError("not YAML", name) from None


def need_dict(value: Any, where: str) -> Mapping[str, Any]:
    """``value`` as an object, or ImportFormatError at ``where``."""
    if not isinstance(value, dict):
        raise ImportFormatError(f"expected an object, found {type(value).__name__}", where)
    return value


def need_list(value: Any, where: str) -> list[Any]:
    """``value`` as a list, or ImportFormatError at ``where``."""
    if not isinstance(value, list):
        raise ImportFormatError(f"expected a list, found {type(value).__name__}", where)
    return value


def opt_number(value: Any, where: str) -> float | None:
    """A finite number, None for null/absent; ImportFormatError for anything else."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ImportFormatError(f"expected a number, found {type(value).__name__}", where)
    try:
        if not math.isfinite(value):
            return None  # the tools write NaN/inf for "no value" (no successful request)
        return float(value)
    except OverflowError:  # an integer literal past a float's range (10**400)
        raise ImportFormatError("number out of range", where) from None


def need_number(value: Any, where: str) -> float:
    """A finite number, or ImportFormatError at ``where``."""
    number = opt_number(value, where)
    if number is None:
        raise ImportFormatError("expected a number, found nothing", where)
    return number


def opt_count(value: Any, where: str) -> int | None:
    """A count (tokens, requests): a whole number >= 0, None for null/absent/NaN;
    ImportFormatError for anything else (a fraction, a negative number, text)."""
    number = opt_number(value, where)
    if number is None:
        return None
    if number < 0 or not number.is_integer():
        raise ImportFormatError(f"expected a whole number >= 0, found {value!r}", where)
    return int(number)


def opt_text(value: Any, where: str) -> str | None:
    """A string cut to ``MAX_IMPORT_TEXT_CHARS``, None for null/absent/empty."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ImportFormatError(f"expected text, found {type(value).__name__}", where)
    return value[:MAX_IMPORT_TEXT_CHARS]
