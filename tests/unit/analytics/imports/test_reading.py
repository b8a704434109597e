"""The readers every importer shares: bounded JSON/YAML, folder sets, tar archives,
the tool registry and the parsing child process."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from analytics.imports.child import parse, parse_in_child
from analytics.imports.errors import ImportFormatError, NotRecognised
from analytics.imports.jsonfile import depth_of, iter_jsonl, load_json, load_yaml, opt_number
from analytics.imports.sets import grouped, is_tar, tar_entries
from analytics.imports.tools import TOOLS, ToolChoice, detect, runs_in
from scenarios.limits import MAX_IMPORT_FILES, MAX_IMPORT_JSON_DEPTH

DATA = Path(__file__).parents[3] / "data" / "imports"
AIPERF_C1 = DATA / "aiperf" / "0.13.0" / "c1"


def _entries(folder: Path) -> list[tuple[str, bytes]]:
    return [
        (p.relative_to(folder).as_posix(), p.read_bytes())
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    ]


def test_json_errors_name_the_line_and_depth_is_bounded() -> None:
    with pytest.raises(ImportFormatError) as caught:
        load_json(b'{\n"a": 1,\n"b": }', "f.json")
    assert caught.value.where == "f.json line 3"
    deep = b"[" * (MAX_IMPORT_JSON_DEPTH + 1) + b"]" * (MAX_IMPORT_JSON_DEPTH + 1)
    with pytest.raises(ImportFormatError, match="nested deeper than 64"):
        load_json(deep, "f.json")
    with pytest.raises(ImportFormatError, match="nested deeper than 64"):
        load_json(b"[" * 200_000 + b"]" * 200_000, "f.json")  # past the interpreter's recursion
    assert depth_of({"a": [1, {"b": 2}]}) == 3
    rows = list(iter_jsonl(b'{"a": 1}\n\n{"a": 2}\n', "r.jsonl"))
    assert rows == [(1, {"a": 1}), (3, {"a": 2})]
    with pytest.raises(ImportFormatError) as caught:
        list(iter_jsonl(b'{"a": 1}\n{"a": \n', "r.jsonl"))
    assert caught.value.where == "r.jsonl line 2"
    with pytest.raises(ImportFormatError) as caught:
        load_yaml(b"a: [1, 2\nb: 3\n", "c.yaml")
    assert caught.value.where is not None and caught.value.where.startswith("c.yaml line")
    assert opt_number(float("nan"), "x") is None
    with pytest.raises(ImportFormatError, match="expected a number"):
        opt_number("12", "x")


def test_yaml_is_read_without_tags_that_make_objects() -> None:
    with pytest.raises(ImportFormatError, match="not YAML"):
        load_yaml(b"a: !!python/object/apply:os.system ['true']\n", "x.yaml")


def test_sets_group_by_folder_and_never_use_a_name_as_a_path() -> None:
    sets = grouped([("c1/a.json", b"1"), ("c1/b.json", b"2"), ("../../etc/x", b"3"), ("t", b"")])
    assert [(s.folder, sorted(s.files)) for s in sets] == [
        ("c1", ["a.json", "b.json"]),
        ("../../etc", ["x"]),
        ("", ["t"]),
    ]
    assert sets[0].label("a.json") == "c1/a.json"
    with pytest.raises(ImportFormatError, match=f"more than {MAX_IMPORT_FILES} files"):
        grouped([(f"f{i}", b"") for i in range(MAX_IMPORT_FILES + 1)])


def test_a_tar_is_read_in_memory_links_and_devices_skipped() -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        data = b'{"x": 1}'
        info = tarfile.TarInfo("run/report.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("run/passwd")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
        fifo = tarfile.TarInfo("run/fifo")
        fifo.type = tarfile.FIFOTYPE
        tar.addfile(fifo)
    body = buffer.getvalue()
    assert is_tar(body) and not is_tar(b'{"x": 1}')
    assert tar_entries(body) == [("run/report.json", b'{"x": 1}')]
    with pytest.raises(ImportFormatError, match="not a readable tar archive"):
        tar_entries(body[: len(body) // 2])


def test_the_registry_recognises_each_tool_and_names_them_all_when_none_fits() -> None:
    assert [c.value for c in ToolChoice] == ["auto", *TOOLS]
    assert detect({p.name: p.read_bytes() for p in AIPERF_C1.iterdir()}) == "aiperf"
    with pytest.raises(NotRecognised) as caught:
        detect({"README.md": b"# notes"})
    assert all(tool in str(caught.value) for tool in TOOLS)
    with pytest.raises(ImportFormatError, match="unknown tool 'other'"):
        runs_in({"a.json": b"{}"}, "other")


def test_a_folder_of_results_parses_and_a_folder_of_notes_is_skipped() -> None:
    parsed = parse(_entries(DATA / "aiperf" / "0.13.0"))
    assert len(parsed.runs) == 2 and parsed.skipped == ["."]
    assert {r.tool for r in parsed.runs} == {"aiperf"}
    with pytest.raises(NotRecognised):
        parse([("README.md", b"# nothing to import")])


def test_the_child_process_answers_what_parse_answers() -> None:
    entries = _entries(AIPERF_C1)
    inline, child = parse(entries), parse_in_child(entries)
    assert child.runs == inline.runs and child.skipped == inline.skipped
    broken = [("profile_export.jsonl", b'{"metadata": \n')]
    with pytest.raises(ImportFormatError) as caught:
        parse_in_child(broken, "aiperf")
    assert caught.value.where == "profile_export.jsonl line 1"
