"""Whether a finished run's figures can be trusted by a script: ``tokenbench run`` and
``submit --wait`` exit 1 when a stage of a provider failed entirely, or its error rate
is above ``--max-error-rate``. A run in which every request was refused is not a
successful benchmark, whatever state its shards ended in."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ALL_FAILED = 1.0
"""The default limit: only a stage whose every request failed fails the run."""


@dataclass(frozen=True)
class FailedStage:
    """A provider's stage in a region whose error rate is above the limit."""

    provider: str
    stage: int
    region: str
    requests: int
    errors: int

    def describe(self) -> str:
        """``sim-fast stage 1 (local): 24 of 24 requests failed (100.0 %)``."""
        rate = 100.0 * self.errors / self.requests
        return (
            f"{self.provider} stage {self.stage} ({self.region}): {self.errors:,} of "
            f"{self.requests:,} requests failed ({rate:.1f} %)"
        )


def failed_stages(
    stages: list[dict[str, Any]], max_error_rate: float = ALL_FAILED
) -> list[FailedStage]:
    """Stages (rows of the report's ``stages``) whose error rate exceeds
    ``max_error_rate`` (a fraction; at 1.0, those where every request failed)."""
    failed = []
    for row in stages:
        requests, errors = int(row.get("requests") or 0), int(row.get("errors") or 0)
        if requests == 0:
            continue
        rate = errors / requests
        if rate > max_error_rate or (max_error_rate >= ALL_FAILED and errors == requests):
            failed.append(
                FailedStage(
                    str(row["provider"]), int(row["stage"]), str(row["region"]), requests, errors
                )
            )
    return failed
