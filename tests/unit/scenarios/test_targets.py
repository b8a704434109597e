"""scenarios/targets.py: a target is the endpoint URL (one spelling), the model and the
key variable; simulated providers have none; shared ones are measured shared."""

from __future__ import annotations

from scenarios.loader import validate_scenario
from scenarios.targets import leased_targets, normalise_url, shared_targets, target_modes


def _scenario(*providers: dict[str, object]) -> object:
    return validate_scenario(
        {
            "name": "t",
            "providers": list(providers),
            "workload": {
                "mix": [
                    {
                        "prompt_tokens": {"dist": "fixed", "value": 4},
                        "output_tokens": {"dist": "fixed", "value": 2},
                    }
                ]
            },
            "load": {"concurrency": [1], "requests_per_level": 1},
        }
    )


def test_one_spelling_of_a_url() -> None:
    assert normalise_url("HTTP://Host:80/v1/") == "http://host/v1"
    assert normalise_url("https://h:443/v1?x=1") == "https://h/v1"
    assert normalise_url("http://h:8000/v1") == "http://h:8000/v1"
    assert normalise_url("http://[::1]:8000/v1") == "http://[::1]:8000/v1"


def test_targets_of_a_scenario() -> None:
    scenario = _scenario(
        {"name": "a", "kind": "openai", "base_url": "http://h/v1", "model": "m"},
        {"name": "k", "kind": "openai", "base_url": "http://h/v1", "model": "m",
         "api_key_env": "KEY_B"},
        {"name": "s", "kind": "openai", "base_url": "http://h/v1", "model": "n", "shared": True},
        {"name": "sim", "kind": "simulated"},
    )  # fmt: skip
    assert leased_targets(scenario) == {
        "http://h/v1 model=m key=-",
        "http://h/v1 model=m key=KEY_B",
    }  # type: ignore[arg-type]
    assert shared_targets(scenario) == {"s": "http://h/v1 model=n key=-"}  # type: ignore[arg-type]
    assert target_modes(scenario)["http://h/v1 model=n key=-"] is False  # type: ignore[arg-type]
