from __future__ import annotations

from analytics.sections.model import SectionOptions
from analytics.sections.workload import dataset, images, prompt_lengths, token_truth, tool_calls
from tests.support.sample_report import report, stage_row

OPTIONS = SectionOptions()


def test_prompt_lengths_planned_against_reported() -> None:
    calibrated = stage_row(
        "api", prompt_tokens_planned_mean=536.0, prompt_tokens_reported_mean=541.4,
        prompt_length_error_pct=1.0, prompt_length_source="calibrated",
        prompt_tokens_per_word=1.0, prompt_length_warmup_error_pct=-2.5,
        prompt_warmup_requests=8,
    )  # fmt: skip
    (section,) = prompt_lengths(report(stages=[calibrated, stage_row("gpu")]), OPTIONS)
    assert section.text_rows() == [
        ["api", "0", "eu", "536", "541", "+1.0 %", "calibrated", "1.00", "-2.5 %", "8"]
    ]
    assert prompt_lengths(report(), OPTIONS) == []


def test_images_with_tokens_the_server_did_not_report_apart() -> None:
    row = stage_row("api", image_requests=10, image_share_pct=50.0, images_per_request_mean=2.0,
                    image_bytes_mean=2048.0, image_tokens_mean=None,
                    text_prompt_tokens_mean=900.0)  # fmt: skip
    (section,) = images(report(stages=[row]), OPTIONS)
    assert section.text_rows() == [["api", "0", "eu", "50 %", "2.0", "2.0", "–", "900"]]
    assert images(report(), OPTIONS) == []


def test_tool_calls_only_when_some_request_carried_tools() -> None:
    row = stage_row("api", tool_requests=40, tool_call_pct=87.5, tool_call_p50_ms=312.25)
    (section,) = tool_calls(report(stages=[row]), OPTIONS)
    assert section.text_rows() == [["api", "0", "eu", "40", "87.5 %", "312.2"]]
    assert tool_calls(report(), OPTIONS) == []


def test_token_truth_unknown_counted_and_short_answers() -> None:
    stages = [
        stage_row("none", ok=12, prompt_tokens_unknown=12, prompt_tokens_counted=0,
                  finish_reasons="stop=9, length=3", output_tokens_planned_mean=32.0,
                  output_tokens_mean=17.25),
        stage_row("counted", 1, ok=8, prompt_tokens_unknown=0, prompt_tokens_counted=8,
                  finish_reasons="length=8", output_tokens_planned_mean=32.0,
                  output_tokens_mean=32.0),
    ]  # fmt: skip
    unknown, counted, short = token_truth(report(stages=stages), OPTIONS)
    assert unknown.title == "Prompt tokens unknown" and "no tokenizer" in unknown.note
    assert unknown.text_rows() == [["none", "0", "eu", "12", "12"]]
    assert counted.text_rows() == [["counted", "1", "eu", "8", "8"]]
    assert short.text_rows() == [["none", "0", "eu", "32", "17.2", "stop=9, length=3"]]
    assert token_truth(report(stages=[{**stages[1], "prompt_tokens_counted": 0}]), OPTIONS) == []


def test_the_dataset_line() -> None:
    fingerprint = {"dataset_id": "ds1", "use": "replay", "rows_used": 3, "requests": 3, "seed": 7,
                   "lengths_counted_with": "estimate"}  # fmt: skip
    (section,) = dataset(report(dataset=fingerprint), OPTIONS)
    assert section.lines[0].startswith("dataset ds1 · replay · 3 rows in 3 requests")
    assert dataset(report(), OPTIONS) == []
