"""Building blocks every scenario model shares: strict models and name patterns."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
ENV_VAR_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"

Name = Annotated[str, Field(pattern=NAME_PATTERN, description="Letters, digits, '_', '.', '-'.")]


class StrictModel(BaseModel):
    """Base for every scenario model: unknown keys are errors, models are immutable, and
    numbers are finite (Infinity and NaN are refused with the field's path)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
