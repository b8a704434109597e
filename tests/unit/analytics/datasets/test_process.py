"""Converting in a child process: the child's answer, its refusals, and the time limit."""

from __future__ import annotations

import pytest

from analytics.datasets.process import convert_in_child
from scenarios.datasets.files import WorkloadFileError
from scenarios.datasets.formats import Conversion, convert
from tests.support.dataset_files import parquet_bytes, prompts_table, sharegpt_json


def test_the_child_answers_what_convert_answers() -> None:
    data = sharegpt_json(20, broken=3)
    child = convert_in_child(data, Conversion(), 100, 1 << 20, "chats.json")
    assert child == convert(data, Conversion(), 100, 1 << 20, "chats.json")
    conversion = Conversion.of("parquet", {"prompt": "question", "output_tokens": "answer_len"})
    table = parquet_bytes(prompts_table(30))
    assert convert_in_child(table, conversion, 100, 1 << 20).rows == 30


def test_refusals_come_back_with_their_reason_and_row() -> None:
    with pytest.raises(WorkloadFileError, match="row 1: not a JSON object"):
        convert_in_child(b'[{"prompt": "a"}, 7]', Conversion(), 10, 1 << 20)
    with pytest.raises(WorkloadFileError, match="line 2") as caught:
        convert_in_child(b'{"conversations": []}\n{oops\n', Conversion(), 10, 1 << 20)
    assert caught.value.line == 2


def test_a_child_past_its_time_is_killed_and_the_file_refused() -> None:
    # A limit no interpreter can start within: the parent gives up and says why.
    with pytest.raises(WorkloadFileError, match="longer than"):
        convert_in_child(sharegpt_json(5), Conversion(), 10, 1 << 20, timeout_s=0.001)
