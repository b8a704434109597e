"""Scenario schema, record schema and the wire contract: the shared base of tokenbench.

This package imports nothing else of tokenbench; workers, analytics and the API build on it.
"""

from scenarios.loader import (
    Problem,
    ScenarioError,
    load_scenario,
    parse_scenario,
    validate_scenario,
)
from scenarios.model import Scenario
from scenarios.providers.kinds import OpenAIProvider, SimulatedProvider
from scenarios.providers.simulate import SimulateSpec

__all__ = [
    "OpenAIProvider",
    "Problem",
    "Scenario",
    "ScenarioError",
    "SimulateSpec",
    "SimulatedProvider",
    "load_scenario",
    "parse_scenario",
    "validate_scenario",
]
