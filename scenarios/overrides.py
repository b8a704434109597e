"""Per-run overrides of a scenario: one model, one function, for every way in.

``tokenbench run``'s load flags (--concurrency, --rate, --requests, --duration) and the
REST ``overrides`` of ``POST /v1/runs`` (and of a schedule) change a scenario the same
way, here: the bounds are declared once (scenarios/limits.py, through :class:`Overrides`)
and the merge is one pure function, :func:`apply_overrides`. Giving concurrency levels
makes the load closed-loop (any ``load.rate`` is dropped); giving rates makes it open-loop
(``load.concurrency`` is dropped, the other ``load.rate`` fields are kept). The result is
scenario data: the caller validates it, so a bad value is reported at its field path.
docs/load.md ("Per-run overrides") documents it for users.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from scenarios.base import Regions
from scenarios.limits import MAX_LEVELS, ConcurrencyLevel, Rate, StageRequests, StageSeconds
from scenarios.loader import Problem, ScenarioError

# Where each override lands in the scenario: its problems are reported at that path.
SCENARIO_PATHS: dict[str, str] = {
    "regions": "regions",
    "concurrency": "load.concurrency",
    "rps": "load.rate.rps",
    "requests_per_level": "load.requests_per_level",
    "duration_s": "load.duration_s",
}


class Overrides(BaseModel):
    """Changes applied to the scenario for this run only."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    regions: Regions | None = Field(default=None, description="Regions to run from.")
    concurrency: list[ConcurrencyLevel] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_LEVELS,
        description="Closed-loop levels; the run becomes closed-loop (load.rate is dropped).",
    )
    rps: list[Rate] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_LEVELS,
        description=(
            "Open-loop rates (stages); the run becomes open-loop (load.concurrency is "
            "dropped, the other load.rate fields kept)."
        ),
    )
    requests_per_level: StageRequests | None = Field(
        default=None, description="Requests per stage."
    )
    duration_s: StageSeconds | None = Field(default=None, description="Stage length.")

    @model_validator(mode="after")
    def _one_loop(self) -> Overrides:
        if self.concurrency is not None and self.rps is not None:
            raise ValueError("give concurrency (closed loop) or rps (open loop), not both")
        return self

    def touches_load(self) -> bool:
        """Whether any override is merged into ``load``."""
        return any(
            value is not None
            for value in (self.concurrency, self.rps, self.requests_per_level, self.duration_s)
        )


def parse_overrides(values: Mapping[str, Any]) -> Overrides:
    """:class:`Overrides` from plain values (the command line's flags), or a
    :class:`ScenarioError` whose problems are at the scenario paths the values land at
    (``load.concurrency.0``), as a bad value in the scenario file itself would be."""
    try:
        return Overrides.model_validate(dict(values))
    except ValidationError as exc:
        problems = []
        for error in exc.errors(include_url=False):
            field, *rest = [str(part) for part in error["loc"]] or [""]
            path = ".".join([SCENARIO_PATHS.get(field, field), *rest]).strip(".")
            problems.append(Problem(path or "load", error["msg"].removeprefix("Value error, ")))
        raise ScenarioError(problems) from None


def apply_overrides(data: Mapping[str, Any], overrides: Overrides) -> dict[str, Any]:
    """Scenario data with ``overrides`` applied; ``data`` itself is left unchanged.

    A ``load`` (or a ``load.rate`` an rps override merges into) that is not a mapping is
    a :class:`ScenarioError` at that path: nothing can be merged into it.
    """
    result = copy.deepcopy(dict(data))
    if overrides.regions is not None:
        result["regions"] = list(overrides.regions)
    if not overrides.touches_load():
        return result
    load = result.setdefault("load", {})
    if load is None:
        load = result["load"] = {}
    if not isinstance(load, dict):
        raise ScenarioError([Problem("load", "Input should be a valid dictionary")])
    if overrides.concurrency is not None:
        load["concurrency"] = list(overrides.concurrency)
        load.pop("rate", None)  # closed loop now
    if overrides.rps is not None:
        rate = load.get("rate")
        if rate is not None and not isinstance(rate, dict):
            raise ScenarioError([Problem("load.rate", "Input should be a valid dictionary")])
        load["rate"] = {**(rate or {}), "rps": list(overrides.rps)}
        load.pop("concurrency", None)  # open loop now
    if overrides.requests_per_level is not None:
        load["requests_per_level"] = overrides.requests_per_level
    if overrides.duration_s is not None:
        load["duration_s"] = overrides.duration_s
    return result
