"""A run's adaptive state, kept by its coordinator on the control loop (docs/answers.md).

What the load decided so far (``api/control/adaptive/decide.py``) and what the checks
of the running stage found (``api/control/adaptive/monitor.py``), and the roles of the
stages an adaptive load is created with.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from analytics.store.adaptive_runs import OutcomeRow, RoleRow
from api.control.planner import initial_levels
from scenarios.model import Scenario


@dataclass
class AdaptiveState:
    """A run's decisions so far, kept by its coordinator on the control loop."""

    deciding: bool  # its load decides stages while it goes
    decided_all: bool = False  # ...and has decided its last one
    ended: dict[tuple[int, str], OutcomeRow] = field(default_factory=dict)  # early ends
    looks: dict[tuple[int, str], int] = field(default_factory=dict)  # early capacity looks
    next_check: float = 0.0  # monotonic time of the next check of the running stage
    busy: bool = False  # a decision or a check is running in a worker thread


def initial_roles(scenario: Scenario) -> list[RoleRow]:
    """The roles of the stages an adaptive load is created with."""
    names = ("synchronous", "throughput")
    return [
        RoleRow(index, provider.name, names[index], "closed", float(level))
        for index, level in enumerate(initial_levels(scenario))
        for provider in scenario.providers
    ]
