"""The simulate command's options build the simulator's spec and name bad options."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from api.cli.simulate import build_spec, describe


def test_cli_options_build_the_spec_and_name_bad_options() -> None:
    spec = build_spec({"model": "llama-3.1-70b", "quant": "fp8", "gpus": 2, "ttft_ms": None})
    assert (spec.model, spec.gpus) == ("llama-3.1-70b", 2)
    with pytest.raises(ValidationError) as caught:
        build_spec({"model": "llama-3.1-70b", "kv_dtype": "int3"})
    assert describe(caught.value)[0].startswith("--kv-dtype: unknown KV dtype")
