"""``tokenbench validate`` (check a scenario file) and ``tokenbench schema`` (the
scenario JSON Schema)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from api.cli.errors import load_or_exit
from api.cli.streams import stdout


def validate(
    scenario_path: Annotated[Path, typer.Argument(help="Scenario file (YAML or JSON).")],
) -> None:
    """Check a scenario file; print its normalised form."""
    scenario = load_or_exit(scenario_path)
    stdout.print_json(scenario.model_dump_json(exclude_none=True))


def schema() -> None:
    """Print the scenario JSON Schema."""
    from scenarios.schema import scenario_json_schema  # noqa: PLC0415

    sys.stdout.write(json.dumps(scenario_json_schema(), indent=2) + "\n")
