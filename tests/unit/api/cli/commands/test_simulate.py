"""The simulate command's options build the simulator's spec and name bad options."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from api.cli import app as cli_app
from api.cli.commands.simulate import build_spec, describe


def test_cli_options_build_the_spec_and_name_bad_options() -> None:
    spec = build_spec({"model": "llama-3.1-70b", "quant": "fp8", "gpus": 2, "ttft_ms": None})
    assert (spec.model, spec.gpus) == ("llama-3.1-70b", 2)
    with pytest.raises(ValidationError) as caught:
        build_spec({"model": "llama-3.1-70b", "kv_dtype": "int3"})
    assert describe(caught.value)[0].startswith("--kv-dtype: unknown KV dtype")


def test_token_truth_options_reach_the_spec_and_bad_ones_exit_2() -> None:
    spec = build_spec({"unfinished_rate": 0.25, "stream_usage": False, "seed": None})
    assert (spec.unfinished_rate, spec.stream_usage) == (0.25, False)
    assert build_spec({"stream_usage": None}).stream_usage is True  # left out: the default
    refused = CliRunner().invoke(
        cli_app.app, ["simulate", "--unfinished-rate", "2", "--no-stream-usage"]
    )
    assert refused.exit_code == 2
    assert "--unfinished-rate: Input should be less than or equal to 1" in refused.output


def test_telemetry_options_reach_the_spec_and_bad_ones_exit_2() -> None:
    spec = build_spec(
        {"spec_decode_acceptance": 0.6, "spec_decode_tokens": 5, "gpu_power": True,
         "gpu_idle_watts": 50.0, "gpu_max_watts": None}
    )  # fmt: skip
    assert (spec.spec_decode_acceptance, spec.spec_decode_tokens) == (0.6, 5)
    assert (spec.gpu_power, spec.gpu_idle_watts, spec.gpu_max_watts) == (True, 50.0, 700.0)
    assert build_spec({"spec_decode_acceptance": None}).spec_decode_acceptance is None
    refused = CliRunner().invoke(
        cli_app.app, ["simulate", "--spec-decode-acceptance", "1.5", "--gpu-power"]
    )
    assert refused.exit_code == 2
    assert "--spec-decode-acceptance: Input should be less than or equal to 1" in refused.output
