"""Dataset files converted into JSONL entries: ShareGPT JSON, OpenAI chat JSONL, Parquet,
Arrow, CSV; rows that cannot be prompts are skipped and counted; bad files and files
beyond the bounds are refused naming the reason."""

from __future__ import annotations

import io

import orjson
import pyarrow as pa
import pytest

from scenarios.datasets.files import WorkloadFileError, first_turn, parse_entries
from scenarios.datasets.formats import Conversion, convert, detect_format, is_entry_jsonl
from scenarios.limits import MAX_CONVERSATION_TURNS, MAX_DATASET_COLUMNS
from tests.support.dataset_files import (
    chat_jsonl,
    parquet_bytes,
    prompts_table,
    sharegpt_json,
    sharegpt_rows,
)

BIG = 1 << 24


def _lines(content: bytes) -> list[dict[str, object]]:
    return [orjson.loads(line) for line in content.splitlines()]


def test_sharegpt_keeps_the_whole_conversation_and_its_rows() -> None:
    rows = sharegpt_rows(5)
    converted = convert(sharegpt_json(5, broken=2), Conversion(), 100, BIG)
    assert converted.source_format == "json/sharegpt"
    assert (converted.source_rows, converted.rows) == (7, 5)
    assert converted.skipped == {"no user turn": 1, "empty conversation": 1}
    lines = _lines(converted.content)
    assert [line["row"] for line in lines] == [0, 1, 2, 3, 4]
    for line, row in zip(lines, rows, strict=True):
        turns = row["conversations"]
        assert line["messages"] == [
            {"role": "user" if t["from"] == "human" else "assistant", "content": t["value"]}
            for t in turns
        ]
    # Workers parse the result with the one entry parser; rows survive it.
    entries = parse_entries(converted.content, "converted", replay=False)
    assert [e.row for e in entries] == [0, 1, 2, 3, 4]
    prompt, answer = first_turn(entries[0].messages)
    assert prompt == (("user", rows[0]["conversations"][0]["value"]),)
    assert answer == rows[0]["conversations"][1]["value"]


def test_skipped_rows_keep_the_row_numbers_of_the_file() -> None:
    data = orjson.dumps(
        [
            {"conversations": []},
            {"conversations": [{"from": "human", "value": "one"}]},
            {"conversations": [{"from": "human", "value": [{"type": "image_url"}]}]},
            {"conversations": [{"from": "alien", "value": "x"}]},
            {"conversations": [{"from": "human", "value": "four"}]},
        ]
    )
    converted = convert(data, Conversion(), 100, BIG)
    assert [line["row"] for line in _lines(converted.content)] == [1, 4]
    assert converted.skipped == {
        "empty conversation": 1,
        "non-text content (images, audio)": 1,
        "unknown speaker": 1,
    }


def test_openai_chat_jsonl_is_stored_as_it_is() -> None:
    data = chat_jsonl(3)
    assert is_entry_jsonl(data, Conversion())
    assert not is_entry_jsonl(data, Conversion.of("auto", {"messages": "messages"}))
    converted = convert(data, Conversion(), 100, BIG)  # converting it anyway keeps it
    assert converted.source_format == "jsonl/openai"
    assert [line["messages"] for line in _lines(converted.content)] == [
        orjson.loads(line)["messages"] for line in data.splitlines()
    ]
    entries = parse_entries(data, "chat", replay=False)
    assert [e.row for e in entries] == [0, 1, 2]
    prompt, answer = first_turn(entries[1].messages)
    assert [role for role, _ in prompt] == ["system", "user"]
    assert answer == orjson.loads(data.splitlines()[1])["messages"][2]["content"]


def test_parquet_with_mapped_columns_reads_only_those() -> None:
    table = prompts_table(50)
    conversion = Conversion.of("auto", {"prompt": "question", "output_tokens": "answer_len"})
    converted = convert(parquet_bytes(table, row_group_size=7), conversion, 100, BIG)
    assert converted.source_format == "parquet/columns"
    lines = _lines(converted.content)
    assert [line["row"] for line in lines] == list(range(50))
    assert [line["messages"][0]["content"] for line in lines] == table["question"].to_pylist()
    assert [line["max_tokens"] for line in lines] == table["answer_len"].to_pylist()


def test_arrow_file_and_stream_and_csv() -> None:
    table = pa.table({"prompt": ["a b", "c d e"], "completion": ["x", "yy"]})
    for writer in (pa.ipc.new_file, pa.ipc.new_stream):
        sink = io.BytesIO()
        with writer(sink, table.schema) as out:
            out.write_table(table)
        converted = convert(sink.getvalue(), Conversion(), 10, BIG)
        assert converted.source_format == "arrow/prompt"
        assert _lines(converted.content)[1]["messages"] == [
            {"role": "user", "content": "c d e"},
            {"role": "assistant", "content": "yy"},
        ]
    csv = b"text,n\nhello there,3\n,4\nbye,x\n"
    conversion = Conversion.of("csv", {"prompt": "text", "output_tokens": "n"})
    converted = convert(csv, conversion, 10, BIG)
    assert _lines(converted.content) == [
        {"row": 0, "messages": [{"role": "user", "content": "hello there"}], "max_tokens": 3}
    ]
    assert converted.skipped == {"empty prompt": 1, "bad output_tokens": 1}


def test_formats_are_detected_from_the_bytes() -> None:
    assert detect_format(parquet_bytes(prompts_table(2))) == "parquet"
    assert detect_format(b"  [{}]") == "json"
    assert detect_format(b'{"a": 1}\n') == "jsonl"
    assert detect_format(b"a,b\n1,2\n", "rows.csv") == "csv"
    with pytest.raises(WorkloadFileError, match="format: csv"):
        detect_format(b"a,b\n1,2\n")


@pytest.mark.parametrize(
    ("data", "conversion", "message"),
    [
        (b"[1, 2]", Conversion(), "row 0: not a JSON object"),
        (b'{"conversations": []}\n[3]\n', Conversion(), "line 2: each line must be"),
        (b'[{"title": "x"}]', Conversion(), "the file has: title"),
        (b'[{"q": "x"}]', Conversion.of("auto", {"prompt": "q", "messages": "m"}), "not both"),
        (b'[{"q": "x"}]', Conversion.of("auto", {"answer": "q"}), "map a prompt column"),
        (b"PAR1garbage", Conversion(), "not a readable parquet file"),
        (b'[{"conversations": []}]', Conversion(), "no row can be a prompt"),
    ],
)
def test_bad_files_are_refused_naming_the_reason(
    data: bytes, conversion: Conversion, message: str
) -> None:
    with pytest.raises(WorkloadFileError, match=message):
        convert(data, conversion, 10, BIG)


def test_a_mapped_column_the_table_lacks_is_named() -> None:
    conversion = Conversion.of("auto", {"prompt": "missing"})
    with pytest.raises(WorkloadFileError, match=r"no column 'missing'.*question"):
        convert(parquet_bytes(prompts_table(3)), conversion, 10, BIG)


def test_rows_bytes_columns_and_turns_are_bounded() -> None:
    with pytest.raises(WorkloadFileError, match="more than 3 rows"):
        convert(sharegpt_json(4), Conversion(), 3, BIG)
    conversion = Conversion.of("auto", {"prompt": "question"})
    with pytest.raises(WorkloadFileError, match="more than 3 rows"):
        convert(parquet_bytes(prompts_table(4)), conversion, 3, BIG)
    with pytest.raises(WorkloadFileError, match="more than 100 bytes"):
        convert(sharegpt_json(4), Conversion(), 10, 100)
    # Parquet is checked against its decoded size before a row group is read.
    with pytest.raises(WorkloadFileError, match="decode to"):
        convert(parquet_bytes(prompts_table(200)), conversion, 1000, 1000)
    wide = pa.table({f"c{i}": [1] for i in range(MAX_DATASET_COLUMNS + 1)} | {"prompt": ["x"]})
    with pytest.raises(WorkloadFileError, match="columns"):
        convert(parquet_bytes(wide), Conversion(), 10, BIG)
    long_chat = [{"from": "human", "value": "x"}] * (MAX_CONVERSATION_TURNS + 1)
    converted = convert(
        orjson.dumps([{"conversations": long_chat}, {"conversations": long_chat[:1]}]),
        Conversion(),
        10,
        BIG,
    )
    assert converted.skipped == {f"more than {MAX_CONVERSATION_TURNS} turns": 1}


def test_conversion_keys_are_canonical() -> None:
    one = Conversion.of("parquet", {"prompt": "q", "output_tokens": "n"})
    other = Conversion.of("parquet", {"output_tokens": "n", "prompt": "q"})
    assert one.key() == other.key()
    assert Conversion.from_key(one.key()) == one
