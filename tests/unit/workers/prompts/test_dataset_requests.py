"""Planning requests from dataset rows: first-turn prompts, filters on counted lengths
(checked against numpy), seeded shuffles that use every row once per cycle, draws with
replacement, and mix sampling that picks the nearest prompt length."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tokenizers import Tokenizer

from scenarios.datasets.files import FileEntry, WorkloadFileError, parse_entries
from scenarios.datasets.formats import Conversion, convert
from scenarios.workload.spec import Workload
from tests.support.dataset_files import sharegpt_json, sharegpt_rows
from tests.support.tiny_tokenizer import train_bpe
from workers.prompts.dataset_requests import DatasetRow, DatasetRows, prepare_rows
from workers.prompts.exact import ExactPrompts
from workers.prompts.plan import (
    WORDS,
    WordPrompts,
    dataset_rows,
    estimate_tokens,
    plan_request,
    request_planner,
)

DATASET_ID = "ds-" + "b" * 64
MIX = [
    {
        "weight": 2,
        "prompt_tokens": {"dist": "uniform", "min": 2, "max": 100},
        "output_tokens": {"dist": "fixed", "value": 7},
    },
    {
        "prompt_tokens": {"dist": "lognormal", "mean": 40, "sigma": 0.5},
        "output_tokens": {"dist": "uniform", "min": 1, "max": 30},
    },
]
ROWS = 60


def _entries(count: int = ROWS) -> tuple[FileEntry, ...]:
    converted = convert(sharegpt_json(count, broken=2), Conversion(), 1000, 1 << 24)
    return parse_entries(converted.content, "test", replay=False)


def _workload(**dataset: Any) -> Workload:
    mix = dataset.pop("mix", None)
    data: dict[str, Any] = {"dataset": {"dataset": DATASET_ID, **dataset}}
    if mix is not None:
        data["mix"] = mix
    return Workload.model_validate(data)


def _lengths() -> tuple[np.ndarray, np.ndarray]:
    """Prompt and answer lengths of the rows by the 4-characters estimate, with numpy."""
    rows = sharegpt_rows(ROWS)
    prompt = np.array([len(r["conversations"][0]["value"]) for r in rows])
    answer = np.array([len(r["conversations"][1]["value"]) for r in rows])
    return np.maximum(1, np.round(prompt / 4)), np.maximum(1, np.round(answer / 4))


def test_a_row_is_its_first_human_turn_and_the_first_answer() -> None:
    rows = sharegpt_rows(ROWS)
    plan = request_planner(_workload(), 5, 0, _entries())
    request = plan(0)
    source = rows[request.dataset_row or 0]["conversations"]
    assert request.messages == (("user", source[0]["value"]),)
    assert request.prompt == source[0]["value"]
    assert request.prompt_tokens == estimate_tokens(source[0]["value"])
    assert request.output_tokens == estimate_tokens(source[1]["value"])
    assert (request.prompt_source, request.dataset_id) == ("estimate", DATASET_ID)


def test_filters_keep_the_rows_numpy_keeps() -> None:
    prompt, answer = _lengths()
    filters = {"min_prompt_tokens": 20, "max_prompt_tokens": 80, "max_output_tokens": 30}
    rows = dataset_rows(_workload(filters=filters), _entries(), _estimate_maker())
    expected = np.flatnonzero((prompt >= 20) & (prompt <= 80) & (answer <= 30))
    assert [r.row for r in rows.rows] == expected.tolist()
    assert rows.dropped == ROWS - len(expected) and rows.counted_with == "estimate"
    assert [r.prompt_tokens for r in rows.rows] == prompt[expected].astype(int).tolist()
    assert [r.output_tokens for r in rows.rows] == answer[expected].astype(int).tolist()


def test_sample_dataset_uses_every_kept_row_once_per_cycle() -> None:
    workload = _workload(filters={"max_prompt_tokens": 60})
    kept = [r.row for r in dataset_rows(workload, _entries(), _estimate_maker()).rows]
    plan = request_planner(workload, 11, 0, _entries())
    first = [plan(seq).dataset_row for seq in range(len(kept))]
    second = [plan(seq).dataset_row for seq in range(len(kept), 2 * len(kept))]
    assert sorted(first) == sorted(second) == kept
    assert first != kept and first != second  # shuffled, anew each cycle
    # Every worker, provider and stage plans the same rows; another seed others.
    again = request_planner(workload, 11, 3, _entries())
    assert [again(seq).dataset_row for seq in range(len(kept))] == first
    other = request_planner(workload, 12, 0, _entries())
    assert [other(seq).dataset_row for seq in range(len(kept))] != first


def test_replacement_draws_are_seeded_and_independent() -> None:
    workload = _workload(replacement=True)
    plan = request_planner(workload, 3, 0, _entries())
    drawn = [plan(seq).dataset_row for seq in range(200)]
    assert drawn == [
        plan_request(workload, 3, 1, seq, _entries()).dataset_row for seq in range(200)
    ]
    assert len(set(drawn)) < ROWS  # 200 draws from 60 rows: some rows never come up
    assert max(drawn.count(row) for row in set(drawn)) > 200 // ROWS


def test_sample_mix_picks_the_nearest_prompt_length_and_the_mix_answer() -> None:
    prompt, _ = _lengths()
    workload = _workload(sample="mix", mix=MIX)
    generated = Workload.model_validate({"mix": MIX, "calibrate": False})
    plan = request_planner(workload, 9, 2, _entries())
    for seq in range(300):
        wanted = plan_request(generated, 9, 2, seq)  # the mix's draw for this request
        request = plan(seq)
        nearest = np.abs(prompt - wanted.prompt_tokens).min()
        assert abs(request.prompt_tokens - wanted.prompt_tokens) == nearest
        assert prompt[request.dataset_row] == request.prompt_tokens
        assert request.output_tokens == wanted.output_tokens


def test_nearest_chooses_among_equally_near_rows() -> None:
    rows = DatasetRows(
        DATASET_ID, tuple(DatasetRow(n, (("user", "x"),), length, None) for n, length in
                          enumerate([10, 20, 20, 30, 40]))
    , "estimate", 0)  # fmt: skip
    picked = {rows.nearest(15, random.Random(seed)).row for seed in range(40)}
    assert picked == {0, 1, 2}  # 10 and both 20s are 5 away
    assert rows.nearest(100, random.Random(0)).row == 4
    assert rows.nearest(1, random.Random(0)).row == 0


def test_lengths_are_counted_with_the_workload_tokenizer(tmp_path: Path) -> None:
    maker = ExactPrompts(Tokenizer.from_file(str(train_bpe(tmp_path / "t.json"))), tuple(WORDS))
    workload = _workload(filters={"max_prompt_tokens": 150})
    rows = dataset_rows(workload, _entries(), maker)
    assert rows.counted_with == "tokenizer"
    source = sharegpt_rows(ROWS)
    counts = np.array([maker.count(r["conversations"][0]["value"]) for r in source])
    assert [r.row for r in rows.rows] == np.flatnonzero(counts <= 150).tolist()
    request = request_planner(workload, 1, 0, _entries(), maker, rows)(0)
    assert request.prompt_source == "tokenizer"
    assert request.prompt_tokens == maker.count(request.prompt)


def test_rows_without_answers_need_the_mix_or_an_output_filter() -> None:
    entries = (FileEntry((("user", "a question"),), row=4), FileEntry((("user", "b"),), 3, row=5))
    with pytest.raises(WorkloadFileError, match=r"row 4 .* no answer length"):
        dataset_rows(_workload(), entries, _estimate_maker())
    kept = dataset_rows(_workload(filters={"min_output_tokens": 1}), entries, _estimate_maker())
    assert [r.row for r in kept.rows] == [5]
    mixed = request_planner(_workload(mix=MIX), 0, 0, entries)
    assert {mixed(seq).output_tokens for seq in range(20)} - {3} <= set(range(1, 31))
    with pytest.raises(WorkloadFileError, match="no row of dataset"):
        dataset_rows(_workload(filters={"min_prompt_tokens": 999}), entries, _estimate_maker())
    with pytest.raises(WorkloadFileError, match="not loaded"):
        request_planner(_workload(), 0, 0, ())


def test_a_shared_prefix_goes_first_and_is_counted() -> None:
    workload = Workload.model_validate(
        {"dataset": {"dataset": DATASET_ID}, "shared_prefix_tokens": 5}
    )
    request = request_planner(workload, 0, 0, _entries())(0)
    own = sharegpt_rows(ROWS)[request.dataset_row or 0]["conversations"][0]["value"]
    assert request.prompt.endswith(own) and len(request.prompt.split()) > len(own.split())
    assert request.prompt_tokens == estimate_tokens(own) + 5


def test_prompt_files_and_replays_record_their_rows() -> None:
    data = b'{"prompt": "a"}\n\n# note\n{"prompt": "b", "max_tokens": 3}\n'
    entries = parse_entries(data, "p", replay=False)
    workload = Workload.model_validate({"prompts": {"dataset": DATASET_ID}, "mix": MIX[:1]})
    plan = request_planner(workload, 0, 0, entries)
    assert [(plan(n).dataset_id, plan(n).dataset_row) for n in range(3)] == [
        (DATASET_ID, 0), (DATASET_ID, 1), (DATASET_ID, 0)
    ]  # fmt: skip


def test_prepare_rows_counts_with_the_given_functions() -> None:
    spec = _workload().dataset
    assert spec is not None
    rows = prepare_rows(
        DATASET_ID, _entries(3), spec, lambda texts: [7] * len(texts), estimate_tokens, True
    )
    assert {r.prompt_tokens for r in rows.rows} == {7} and rows.counted_with == "tokenizer"


def _estimate_maker() -> WordPrompts:
    return WordPrompts()
