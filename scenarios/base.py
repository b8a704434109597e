"""Building blocks every scenario model shares: strict models, names, environment variable
names, URLs and dataset ids, each pattern declared once."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from scenarios.limits import MAX_ID_CHARS, MAX_REGIONS, MAX_URL_CHARS

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
ENV_VAR_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
URL_PATTERN = r"^https?://[^\s/]+(/\S*)?$"
# An uploaded dataset's id (POST /v1/datasets answers it): workloads and tokenizers name it.
DATASET_ID_PATTERN = r"^ds-[0-9a-f]{64}$"

Name = Annotated[str, Field(pattern=NAME_PATTERN, description="Letters, digits, '_', '.', '-'.")]
# The regions a run goes from (a scenario's, or a run's override of them).
Regions = Annotated[list[Name], Field(min_length=1, max_length=MAX_REGIONS)]
# The name of an environment variable holding a credential (never the credential itself).
EnvVar = Annotated[str, Field(pattern=ENV_VAR_PATTERN, max_length=MAX_ID_CHARS)]
# An http(s) URL with a host (a provider's base_url, endpoint, metrics_url).
Url = Annotated[str, Field(pattern=URL_PATTERN, max_length=MAX_URL_CHARS)]


class StrictModel(BaseModel):
    """Base for every scenario model: unknown keys are errors, models are immutable, and
    numbers are finite (Infinity and NaN are refused with the field's path)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
