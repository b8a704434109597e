"""``workload.prefix_cache``: prompts built to hit a server's prefix cache at a stated rate.

Each generated prompt starts with a prefix of the stage's *repeated text* (the same
words for every request of the stage, on every worker, provider and region) that is
``target_hit_rate`` of its planned prompt tokens, followed by a tail of its own: a
server with prefix caching finds that prefix from the stage's earlier requests (across
users, and across the turns of sessions, whose later turns resend their conversation).
The stage's first request seeds the text and is planned as a miss. With the workload's
tokenizer the prefix is exact in tokens (docs/workloads.md, docs/metrics.md "Prefix cache").
"""

from __future__ import annotations

from pydantic import Field

from scenarios.base import StrictModel

# The share a prompt may repeat: at least one token of each prompt stays its own, so
# requests stay distinct and the server has something to prefill.
MAX_TARGET_HIT_RATE = 0.99


class PrefixCacheSpec(StrictModel):
    """The share of each prompt's tokens that repeats text the server has already seen."""

    target_hit_rate: float = Field(
        ge=0,
        le=MAX_TARGET_HIT_RATE,
        description=(
            "Share of each generated prompt's planned tokens that repeats the stage's "
            "shared text (0 to 0.99): the client-observed hit rate the workload aims at."
        ),
    )
