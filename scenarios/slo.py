"""Per-request service-level objectives (the scenario's ``slo``, a capacity search's)."""

from __future__ import annotations

from pydantic import Field

from scenarios.base import StrictModel
from scenarios.limits import MAX_LATENCY_MS

__all__ = ["SLO"]


class SLO(StrictModel):
    """Per-request service-level objectives; a request meets the SLO if it meets each given."""

    ttft_ms: float | None = Field(
        default=None, gt=0, le=MAX_LATENCY_MS, description="Max time to first token."
    )
    tpot_ms: float | None = Field(
        default=None, gt=0, le=MAX_LATENCY_MS, description="Max time per output token."
    )
    e2e_ms: float | None = Field(
        default=None, gt=0, le=MAX_LATENCY_MS, description="Max end-to-end latency."
    )
