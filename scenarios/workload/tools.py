"""``workload.tools``: function tools offered with (a share of) the requests.

Requests that carry tools send OpenAI-style ``tools`` and ``tool_choice``; a streamed
tool-call delta counts as output (docs/metrics.md). The definitions are either given
(OpenAI function tool schemas, sent as written) or generated (``count`` small functions),
and bounded in number and size because they are sent with every request that carries
them and a REST submitter is untrusted (scenarios/limits.py).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from scenarios.base import Name, StrictModel
from scenarios.limits import MAX_TOOL_DEFINITIONS_BYTES, MAX_TOOLS


class ForcedFunction(StrictModel):
    """``tool_choice`` naming one function the model must call."""

    function: Name = Field(description="Name of the function the model must call.")


ToolChoice = Literal["auto", "required", "none"] | ForcedFunction


class ToolsSpec(StrictModel):
    """Function tools sent with a share of the requests."""

    definitions: list[dict[str, Any]] | None = Field(
        default=None,
        max_length=MAX_TOOLS,
        description=(
            "OpenAI function tool schemas ({type: function, function: {name, parameters}}), "
            "sent as written. Not with count."
        ),
    )
    count: int | None = Field(
        default=None,
        ge=1,
        le=MAX_TOOLS,
        description="Generate this many small function tools (not with definitions).",
    )
    tool_choice: ToolChoice = Field(
        default="auto",
        description="auto | required | none | {function: name} (forces that function).",
    )
    fraction: float = Field(
        default=1.0, ge=0, le=1, description="Share of requests that carry the tools."
    )

    @field_validator("definitions")
    @classmethod
    def _bounded_functions(cls, value: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
        if value is None:
            return None
        for tool in value:
            function = tool.get("function")
            if tool.get("type") != "function" or not isinstance(function, dict):
                raise ValueError("each definition is {type: function, function: {...}}")
            if not isinstance(function.get("name"), str) or not function["name"]:
                raise ValueError("each function needs a name")
        try:
            size = len(json.dumps(value, allow_nan=False, separators=(",", ":")))
        except (TypeError, ValueError, RecursionError) as exc:
            raise ValueError(f"must be plain JSON with finite numbers: {exc}") from None
        if size > MAX_TOOL_DEFINITIONS_BYTES:
            raise ValueError(
                f"are {size} bytes as JSON, more than the {MAX_TOOL_DEFINITIONS_BYTES} "
                "sent with every request"
            )
        return value

    @model_validator(mode="after")
    def _one_source(self) -> ToolsSpec:
        if (self.definitions is None) == (self.count is None):
            raise ValueError("give either definitions or count")
        choice = self.tool_choice
        if isinstance(choice, ForcedFunction) and choice.function not in self.names():
            raise ValueError(f"tool_choice names {choice.function!r}, which is not a tool")
        return self

    def tools(self) -> list[dict[str, Any]]:
        """The ``tools`` array of a request."""
        if self.definitions is not None:
            return self.definitions
        return [generated_tool(i) for i in range(self.count or 0)]

    def names(self) -> list[str]:
        """Function names of the tools."""
        return [str(tool["function"]["name"]) for tool in self.tools()]

    def choice(self) -> str | dict[str, Any]:
        """The ``tool_choice`` of a request, in OpenAI's shape."""
        choice = self.tool_choice
        if isinstance(choice, ForcedFunction):
            return {"type": "function", "function": {"name": choice.function}}
        return choice


def generated_tool(index: int) -> dict[str, Any]:
    """A small function tool, the same for every run: ``lookup_<index>(query, limit)``."""
    return {
        "type": "function",
        "function": {
            "name": f"lookup_{index}",
            "description": f"Look up records of kind {index} matching a query.",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What to look for."},
                    "limit": {"type": "integer", "description": "Most results to return."},
                },
                "required": ["query"],
            },
        },
    }
