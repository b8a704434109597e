"""Reading the known series of a Prometheus exposition (workers/shard/prometheus_text.py): other
names and comments are skipped unparsed, a bad or out-of-bounds kept line is dropped and
counted, never an error."""

from __future__ import annotations

from scenarios.limits import MAX_METRICS_LABEL_CHARS, MAX_METRICS_LABELS
from workers.shard.prometheus_text import parse_known

NAMES = {"vllm:num_requests_running", "vllm:prompt_tokens_total", "DCGM_FI_DEV_GPU_UTIL"}


def test_only_known_names_are_kept_with_their_labels() -> None:
    text = "\n".join(
        [
            "# HELP vllm:num_requests_running Number of requests running.",
            "# TYPE vllm:num_requests_running gauge",
            'vllm:num_requests_running{model_name="llama",engine="0"} 3.0',
            'vllm:num_requests_running_extra{model_name="llama"} 9',  # a longer name
            'vllm:time_to_first_token_seconds_bucket{le="0.1"} 5',
            "vllm:prompt_tokens_total 1.5e3",
            'DCGM_FI_DEV_GPU_UTIL{gpu="0",modelName="NVIDIA H100 \\"SXM\\""} 57 1700000000000',
            "",
        ]
    )
    parsed = parse_known(text, NAMES)
    assert parsed.dropped == 0
    assert parsed.samples == [
        {
            "metric": "vllm:num_requests_running",
            "labels": [("engine", "0"), ("model_name", "llama")],
            "value": 3.0,
        },
        {"metric": "vllm:prompt_tokens_total", "labels": [], "value": 1500.0},
        {
            "metric": "DCGM_FI_DEV_GPU_UTIL",
            "labels": [("gpu", "0"), ("modelName", 'NVIDIA H100 "SXM"')],
            "value": 57.0,
        },
    ]


def test_bad_lines_and_values_are_dropped_and_counted() -> None:
    text = "\n".join(
        [
            "vllm:num_requests_running not-a-number",
            "vllm:num_requests_running NaN",
            "vllm:prompt_tokens_total +Inf",
            'vllm:num_requests_running{model_name="unterminated} 1',
            "garbage line that names nothing",
            "vllm:prompt_tokens_total 4",
        ]
    )
    parsed = parse_known(text, NAMES)
    assert parsed.samples == [{"metric": "vllm:prompt_tokens_total", "labels": [], "value": 4.0}]
    assert parsed.dropped == 4


def test_series_and_labels_are_bounded() -> None:
    many_labels = ",".join(f'l{i}="v"' for i in range(MAX_METRICS_LABELS + 1))
    long_value = "x" * (MAX_METRICS_LABEL_CHARS + 1)
    text = "\n".join(
        [
            f"vllm:num_requests_running{{{many_labels}}} 1",
            f'vllm:num_requests_running{{model_name="{long_value}"}} 1',
            *(f'DCGM_FI_DEV_GPU_UTIL{{gpu="{i}"}} {i}' for i in range(5)),
        ]
    )
    parsed = parse_known(text, NAMES, max_series=3)
    assert [s["value"] for s in parsed.samples] == [0.0, 1.0, 2.0]
    assert parsed.dropped == 2 + 2


def test_an_empty_or_foreign_answer_has_no_series() -> None:
    assert parse_known("", NAMES).samples == []
    assert parse_known('{"object": "list"}', NAMES).samples == []
