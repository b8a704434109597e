"""The gateway's pure parts: its config, sampling, and the usage-event filter."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from scenarios.gateway_config import GatewayConfig, load_gateway_config, parse_gateway_config
from scenarios.loader import ScenarioError
from tests.support.paths import EXAMPLES
from workers.gateway.proxy import UsageFilter
from workers.gateway.sampling import Sampler, hash_fraction, messages_digest

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


def test_hash_sampling_is_deterministic_and_near_the_rate() -> None:
    sampler = Sampler(0.2, "messages", "salt")
    bodies = [{"messages": [{"role": "user", "content": f"q{n}"}]} for n in range(5000)]
    first = [sampler.decide(body, {}) for body in bodies]
    assert first == [sampler.decide(body, {}) for body in bodies]
    # 5000 draws at p = 0.2: sd 0.0057; 0.03 is > 5 sd (fails < 1 in 10^6 for a fair hash).
    assert abs(sum(first) / len(first) - 0.2) < 0.03
    expected = [hash_fraction(messages_digest(body["messages"], "salt")) < 0.2 for body in bodies]
    assert first == expected


def test_sampling_by_body_field_and_header() -> None:
    by_user = Sampler(0.5, "body:user", "")
    decisions = {by_user.decide({"user": "alice", "messages": [n]}, {}) for n in range(50)}
    assert len(decisions) == 1  # the same user is always in or always out
    by_header = Sampler(0.5, "header:x-session", "")
    assert by_header.value({}, {"x-session": "s1"}) == b"s1"
    assert by_header.value({}, {}) is None  # absent: a random draw
    assert Sampler(0.0, None, "").decide({}, {}) is False
    assert Sampler(1.0, None, "").decide({}, {}) is True
    draws = Sampler(0.3, None, "", random.Random(1))
    share = sum(draws.decide({}, {}) for _ in range(5000)) / 5000
    assert abs(share - 0.3) < 0.04


USAGE = b'data: {"id":"x","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}\n\n'
TOKEN = b'data: {"id":"x","choices":[{"index":0,"delta":{"content":"hi"}}],"usage":null}\n\n'
FINISH = b'data: {"id":"x","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
DONE = b"data: [DONE]\n\n"


def test_usage_filter_removes_only_the_usage_event() -> None:
    stream = TOKEN + TOKEN + FINISH + USAGE + DONE
    for size in (1, 7, 50, len(stream)):
        usage_filter = UsageFilter()
        out = b"".join(usage_filter.feed(stream[i : i + size]) for i in range(0, len(stream), size))
        out += usage_filter.flush()
        assert out == TOKEN + TOKEN + FINISH + DONE, size


def test_usage_filter_releases_complete_events_at_once() -> None:
    usage_filter = UsageFilter()
    assert usage_filter.feed(TOKEN[:10]) == b""
    assert usage_filter.feed(TOKEN[10:] + FINISH[:5]) == TOKEN
    crlf = TOKEN.replace(b"\n\n", b"\r\n\r\n")
    assert UsageFilter().feed(crlf) == crlf
    assert UsageFilter().feed(USAGE.replace(b"\n\n", b"\r\n\r\n")) == b""
