"""The scenario JSON Schema, generated from the pydantic model.

A copy is committed at ``scenarios/schema/scenario.schema.json`` for editors and other
tools; a test fails when it is stale (regenerate with ``tokenbench schema``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scenarios.model import Scenario

SCHEMA_PATH = Path(__file__).parent / "schema" / "scenario.schema.json"


def scenario_json_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of a scenario file."""
    schema = Scenario.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://tokenbench.dev/schema/scenario.schema.json"
    return schema
