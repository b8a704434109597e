"""The tools tokenbench imports, which one wrote a set of files, and the bounds every
import is held to whichever tool it is.

Each importer module has ``TOOL`` (its name on the command line), ``FORMATS`` (the
formats and tool versions it reads, named in a refusal), ``recognises(files)`` and
``runs_in(files)``: the runs in a set of files (one folder's files, by name; a name is
never used as a path). Importers are pure: bytes in, ``ImportedRun`` out.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from enum import StrEnum
from types import ModuleType

from analytics.imports import aiperf, guidellm, inference_perf, llmd, vllm_bench
from analytics.imports.errors import ImportFormatError, NotRecognised
from analytics.imports.model import ImportedFile, ImportedRun
from scenarios.limits import (
    MAX_IMPORT_BYTES,
    MAX_IMPORT_FILES,
    MAX_IMPORT_REQUESTS,
    MAX_IMPORT_STAGES,
)

__all__ = ["IMPORTERS", "TOOLS", "ToolChoice", "described", "detect", "runs_in"]

IMPORTERS: dict[str, ModuleType] = {
    module.TOOL: module for module in (aiperf, guidellm, vllm_bench, inference_perf, llmd)
}
TOOLS: tuple[str, ...] = tuple(IMPORTERS)


class ToolChoice(StrEnum):
    """``--tool`` and ``?tool=``: a tool's name, or ``auto`` (recognised from the files)."""

    auto = "auto"
    aiperf = "aiperf"
    guidellm = "guidellm"
    vllm_bench = "vllm-bench"
    inference_perf = "inference-perf"
    llmd = "llmd"


def described(name: str, data: bytes) -> ImportedFile:
    """A file's provenance: its name as given, SHA-256 and size."""
    return ImportedFile(name=name, sha256=hashlib.sha256(data).hexdigest(), size=len(data))


def _expected() -> str:
    return "; ".join(f"{tool}: {', '.join(m.FORMATS)}" for tool, m in IMPORTERS.items())


def detect(files: Mapping[str, bytes]) -> str:
    """The tool whose files these are; ImportFormatError naming every format read."""
    found = [tool for tool, module in IMPORTERS.items() if module.recognises(files)]
    if not found:
        names = ", ".join(sorted(files)[:8]) or "no files"
        raise NotRecognised(
            f"not a result file of a tool tokenbench imports ({names}); expected one of "
            f"{_expected()}"
        )
    return str(found[0])


def runs_in(files: Mapping[str, bytes], tool: str = "auto") -> list[ImportedRun]:
    """The runs in one set of files, by ``tool`` (``auto``: recognised), checked
    against the import bounds; ImportFormatError says what is wrong and where."""
    if len(files) > MAX_IMPORT_FILES:
        raise ImportFormatError(f"{len(files)} files: at most {MAX_IMPORT_FILES} in one import")
    size = sum(len(data) for data in files.values())
    if size > MAX_IMPORT_BYTES:
        raise ImportFormatError(f"{size} bytes: at most {MAX_IMPORT_BYTES} in one import")
    if tool == "auto":
        tool = detect(files)
    module = IMPORTERS.get(tool)
    if module is None:
        raise ImportFormatError(f"unknown tool {tool!r}; expected one of {', '.join(TOOLS)}")
    # A single file named with its tool is read as that tool's, so that a damaged one is
    # refused with its line; a folder's files the tool does not recognise are skipped.
    if not module.recognises(files) and len(files) > 1:
        raise NotRecognised(
            f"no {tool} result in these files; expected {', '.join(module.FORMATS)}"
        )
    runs: list[ImportedRun] = module.runs_in(files)
    if not runs:
        raise NotRecognised(
            f"no {tool} result in these files; expected {', '.join(module.FORMATS)}"
        )
    requests = sum(len(stage.requests) for run in runs for stage in run.stages)
    if requests > MAX_IMPORT_REQUESTS:
        raise ImportFormatError(f"{requests} requests: at most {MAX_IMPORT_REQUESTS} in one import")
    for run in runs:
        if not run.stages:
            raise ImportFormatError(f"a {tool} run with no benchmark in it")
        if len(run.stages) > MAX_IMPORT_STAGES:
            raise ImportFormatError(
                f"{len(run.stages)} stages: at most {MAX_IMPORT_STAGES} in one run"
            )
    return runs
