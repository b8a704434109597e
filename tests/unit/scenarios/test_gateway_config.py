"""The gateway config: the shipped example, invalid fields named, YAML lines kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from scenarios.gateway_config import GatewayConfig, load_gateway_config, parse_gateway_config
from scenarios.loader import ScenarioError
from tests.support.paths import EXAMPLES

EXAMPLE = EXAMPLES / "gateway.yml"

PRIMARY = {"name": "prod", "kind": "openai", "base_url": "http://127.0.0.1:8000/v1", "model": "m"}
SHADOW = {"name": "cand", "kind": "simulated"}


def config(**overrides: object) -> GatewayConfig:
    data: dict[str, object] = {"primary": PRIMARY, "shadows": [SHADOW], "regions": ["eu"]}
    data.update(overrides)
    return parse_gateway_config(data)


def test_shipped_example_is_valid() -> None:
    loaded = load_gateway_config(EXAMPLE)
    assert loaded.sample_rate == 0.05
    assert [s.name for s in loaded.shadows] == ["groq", "cand-sim"]
    scenario = loaded.session_scenario()
    assert [p.name for p in scenario.providers] == ["prod", "groq", "cand-sim"]
    assert scenario.regions == ["gateway", "eu", "us"]


@pytest.mark.parametrize(
    ("overrides", "path", "message"),
    [
        ({"primary": {"name": "b", "kind": "bedrock", "model": "x"}}, "primary", "kind openai"),
        ({"shadows": [SHADOW, SHADOW]}, "", "duplicate provider name"),
        ({"shadows": [{**SHADOW, "name": "prod"}]}, "", "duplicate provider name"),
        ({"regions": ["gateway"]}, "", "gateway_region"),
        ({"regions": []}, "regions", "at least 1"),
        ({"sample_rate": 1.5}, "sample_rate", "less than or equal"),
        ({"sample_by": "cookie:x"}, "sample_by", "pattern"),
        ({"bogus": 1}, "bogus", "Extra inputs"),
    ],
)
def test_invalid_configs_name_the_field(
    overrides: dict[str, object], path: str, message: str
) -> None:
    with pytest.raises(ScenarioError) as info:
        config(**overrides)
    assert any(p.path == path and message in p.message for p in info.value.problems), info.value


def test_errors_carry_the_yaml_line(tmp_path: Path) -> None:
    file = tmp_path / "g.yaml"
    file.write_text(
        "primary: {name: prod, kind: openai, base_url: http://h/v1, model: m}\n"
        "regions: [eu]\n"
        "sample_rate: 2\n"
    )
    with pytest.raises(ScenarioError) as info:
        load_gateway_config(file)
    assert "g.yaml:3: sample_rate" in str(info.value)
