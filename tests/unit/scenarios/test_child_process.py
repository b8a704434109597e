"""The parent's side of a child process: a child too slow, or one that ends without an
answer, is a ChildFailed that says what was being done and why. (Answers that arrive
are tested through the converters, importers and bundle checks that use it.)"""

from __future__ import annotations

import pytest

from scenarios.child_process import ChildFailed, ask_child


def test_a_child_that_outlives_its_time_is_killed_and_named() -> None:
    with pytest.raises(ChildFailed, match=r"reading the files took longer than 0 s: refused"):
        ask_child("json.tool", {"a": 1}, b"", 0.001, "reading the files")


def test_a_child_without_an_answer_names_its_last_words() -> None:
    # json.tool reads the header line and the bytes after it as one document: not JSON,
    # so it ends with 1 and says why on stderr.
    with pytest.raises(ChildFailed) as caught:
        ask_child("json.tool", {"a": 1}, b"not json", 60, "converting the file")
    assert caught.value.reason.startswith("converting the file failed (its process ended with 1:")
