"""Binding rules of worker secrets (scenarios/security/host_rules.py): scheme, host pattern, port.

A key goes over https to port 443 unless its rule says ``http://`` or names a port;
``*`` is exactly one DNS label; ``{aws-region}`` one AWS region label. Every built-in
pattern of the preset catalog is matched against the provider's real host names and
against look-alikes that other tenants of the same domain can own.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from scenarios.providers.presets import load_presets, preset_secret_hosts
from scenarios.security.host_rules import HostRule, InvalidHostRule, host_matches, parse_rule
from scenarios.settings import WorkerSettings


@pytest.mark.parametrize(
    ("entry", "rule"),
    [
        ("api.groq.com", HostRule("https", "api.groq.com", 443)),
        ("API.Groq.com.", HostRule("https", "api.groq.com", 443)),
        ("https://api.groq.com/", HostRule("https", "api.groq.com", 443)),
        ("api.groq.com:8443", HostRule("https", "api.groq.com", 8443)),
        ("http://vllm.internal", HostRule("http", "vllm.internal", 80)),
        ("http://vllm.internal:8000", HostRule("http", "vllm.internal", 8000)),
        ("http://127.0.0.1:*", HostRule("http", "127.0.0.1", None)),
        ("http://[::1]:8000", HostRule("http", "::1", 8000)),
        ("[::1]", HostRule("https", "::1", 443)),
        ("bedrock-runtime.{aws-region}.amazonaws.com",
         HostRule("https", "bedrock-runtime.{aws-region}.amazonaws.com", 443)),
    ],
)  # fmt: skip
def test_rules_parse_with_https_and_443_unless_written(entry: str, rule: HostRule) -> None:
    assert parse_rule(entry) == rule


@pytest.mark.parametrize(
    "entry",
    [
        "ftp://files.example",
        "https://api.example/v1",
        "user@api.example",
        "api.example:0",
        "api.example:99999",
        "api.example:http",
        "",
        "[::1",
        "api.example?x=1",
        "api exa.mple",
    ],
)
def test_a_malformed_rule_is_refused_by_name(entry: str) -> None:
    with pytest.raises(InvalidHostRule, match="'"):
        parse_rule(entry)


@pytest.mark.parametrize(
    ("scheme", "host", "port", "allowed"),
    [
        ("https", "api.groq.com", None, True),
        ("https", "api.groq.com", 443, True),
        ("http", "api.groq.com", None, False),  # the issue: plain http got the key
        ("http", "api.groq.com", 8080, False),  # ... and any port
        ("https", "api.groq.com", 8080, False),
        ("https", "api.groq.com.evil.example", None, False),
    ],
)
def test_a_bare_host_rule_allows_tls_to_port_443_only(
    scheme: str, host: str, port: int | None, allowed: bool
) -> None:
    assert parse_rule("api.groq.com").allows(scheme, host, port) is allowed


def test_explicit_schemes_and_ports_are_exact() -> None:
    plain = parse_rule("http://vllm.internal:8000")
    assert plain.allows("http", "vllm.internal", 8000)
    assert not plain.allows("http", "vllm.internal", 8001)
    assert not plain.allows("https", "vllm.internal", 8000)
    loopback = parse_rule("http://127.0.0.1:*")
    assert loopback.allows("http", "127.0.0.1", 41234)
    assert not loopback.allows("https", "127.0.0.1", 41234)
    assert not loopback.allows("http", "127.0.0.2", 41234)
    assert str(loopback) == "http://127.0.0.1:*"
    assert str(parse_rule("[::1]:8443")) == "https://[::1]:8443"


@pytest.mark.parametrize(
    ("host", "pattern", "matches"),
    [
        ("a.example", "*.example", True),
        ("a.b.example", "*.example", False),  # `*` never spans a dot
        (".example", "*.example", False),  # nor matches an empty label
        ("vllm-3.internal", "vllm-*.internal", True),
        ("vllm.3.internal", "vllm-*.internal", False),
        ("us-east-1", "{aws-region}", True),
        ("us-gov-west-1", "{aws-region}", True),
        ("s3", "{aws-region}", False),
        ("s3-us-west-2", "{aws-region}", False),
        ("::1", "[::1]", True),
        ("::2", "[::1]", False),
    ],
)
def test_host_patterns_match_label_by_label(host: str, pattern: str, matches: bool) -> None:
    assert host_matches(host, pattern) is matches


# Every built-in pattern, with the provider's real host names (docs/security.md lists
# them) and look-alikes other customers of the same domain can own or name.
REAL_HOSTS = {
    "TOGETHER_API_KEY": ["api.together.xyz"],
    "FIREWORKS_API_KEY": ["api.fireworks.ai"],
    "GROQ_API_KEY": ["api.groq.com"],
    "OPENROUTER_API_KEY": ["openrouter.ai"],
    "AWS_ACCESS_KEY_ID": [
        "bedrock-runtime.us-east-1.amazonaws.com",
        "bedrock-runtime.eu-central-1.amazonaws.com",
        "bedrock-runtime.ap-southeast-2.amazonaws.com",
        "bedrock-runtime.us-gov-west-1.amazonaws.com",
        "bedrock-runtime-fips.us-east-1.amazonaws.com",
    ],
    "REPLICATE_API_TOKEN": [
        "api.replicate.com",
        "stream.replicate.com",
        "streaming.api.replicate.com",
        "streaming-api.svc.us.c.replicate.net",
    ],
}
LOOK_ALIKES = {
    "GROQ_API_KEY": ["api.groq.com.evil.example", "evil-api.groq.com", "groq.com"],
    "AWS_ACCESS_KEY_ID": [
        # S3 buckets anyone can name, on the legacy global and dash-region endpoints.
        "bedrock-runtime.s3.amazonaws.com",
        "bedrock-runtime.s3-us-west-2.amazonaws.com",
        "bedrock-runtime.s3-external-1.amazonaws.com",
        "bedrock-runtime.x.s3.amazonaws.com",
        "bedrock-runtime.us-east-1.elb.amazonaws.com",
        "bedrock-runtime.execute-api.amazonaws.com",
    ],
    "REPLICATE_API_TOKEN": ["streaming-api.svc.a.b.replicate.net", "api.replicate.com.evil"],
}


def _allowed(variable: str, host: str, scheme: str = "https", port: int | None = None) -> bool:
    rules = [parse_rule(entry) for entry in preset_secret_hosts()[variable]]
    return any(rule.allows(scheme, host, port) for rule in rules)


@pytest.mark.parametrize(
    ("variable", "host"), [(v, h) for v, hosts in REAL_HOSTS.items() for h in hosts]
)
def test_every_built_in_pattern_matches_its_providers_real_hosts(variable: str, host: str) -> None:
    assert _allowed(variable, host)
    assert not _allowed(variable, host, scheme="http")
    assert not _allowed(variable, host, port=8080)


@pytest.mark.parametrize(
    ("variable", "host"), [(v, h) for v, hosts in LOOK_ALIKES.items() for h in hosts]
)
def test_no_built_in_pattern_matches_a_look_alike(variable: str, host: str) -> None:
    assert not _allowed(variable, host)


def test_every_preset_rule_parses_and_no_pattern_spans_labels() -> None:
    for preset in load_presets().values():
        for entry in preset.hosts:
            rule = parse_rule(entry)
            assert (rule.scheme, rule.port) == ("https", 443), entry
            # A label that is only `*` must sit under the provider's own domain name.
            labels = rule.host.split(".")
            assert "*" not in labels[-3:], entry


def test_the_operators_bindings_are_checked_when_the_settings_load() -> None:
    # A rule that does not parse stops the worker at start, naming it.
    ok = WorkerSettings(secret_hosts={"K": ["http://vllm.internal:8000", "api.example"]})
    assert ok.secret_hosts["K"] == ["http://vllm.internal:8000", "api.example"]
    with pytest.raises(ValidationError, match=r"ftp://vllm\.internal"):
        WorkerSettings(secret_hosts={"K": ["ftp://vllm.internal"]})
