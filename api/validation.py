"""Turning request bodies into validated scenarios, and the egress check on accept."""

from __future__ import annotations

from typing import Any

from api.errors import ProviderEgressDenied
from api.schemas import RunOverrides
from scenarios.egress import EgressDenied, check_url
from scenarios.loader import Problem, ScenarioError, parse_scenario, validate_scenario
from scenarios.model import Scenario
from scenarios.settings import EgressSettings


def scenario_from_body(body: bytes) -> Scenario:
    """A scenario from a YAML or JSON request body (ScenarioError on any problem)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise ScenarioError([Problem("", "body is not UTF-8 text")]) from None
    return parse_scenario(text, "body")


def scenario_with_overrides(data: dict[str, Any], overrides: RunOverrides | None) -> Scenario:
    """Apply per-run overrides to scenario data, then validate the result."""
    if overrides is not None:
        data = {**data, "load": dict(data.get("load") or {})}
        if overrides.regions is not None:
            data["regions"] = overrides.regions
        for key in ("concurrency", "requests_per_level", "duration_s"):
            value = getattr(overrides, key)
            if value is not None:
                data["load"][key] = value
        if overrides.rps is not None:
            rate = dict(data["load"].get("rate") or {})
            data["load"]["rate"] = {**rate, "rps": overrides.rps}
    return validate_scenario(data)


def check_scenario_egress(scenario: Scenario, policy: EgressSettings) -> None:
    """Refuse a scenario naming a URL the egress policy forbids (no DNS lookup here:
    the worker checks resolved addresses again before connecting)."""
    for index, provider in enumerate(scenario.providers):
        for url in provider.endpoint_urls():
            try:
                check_url(url, policy, resolve=False)
            except EgressDenied as exc:
                raise ProviderEgressDenied(index, exc) from None
