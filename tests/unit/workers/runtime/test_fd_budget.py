"""The worker's descriptor budget (workers/runtime/fd_budget.py)."""

from __future__ import annotations

import resource

import pytest

from workers.runtime.fd_budget import (
    DescriptorBudget,
    DescriptorBudgetExceeded,
    budget_refusal,
    descriptor_limit,
    descriptors_open,
)


def test_a_need_within_the_budget_is_served() -> None:
    assert budget_refusal(need=500, limit=20_000, held=30, reserve=256, pending=0) is None
    assert budget_refusal(need=19_714, limit=20_000, held=30, reserve=256, pending=0) is None


def test_a_need_beyond_the_budget_is_refused_naming_both() -> None:
    refusal = budget_refusal(need=50_000, limit=20_000, held=30, reserve=256, pending=0)
    assert refusal is not None
    assert "needs 50000 connections" in refusal
    assert "budget is 19714" in refusal
    assert "RLIMIT_NOFILE 20000 - 30 open - 256 reserved" in refusal


def test_claims_not_yet_opened_count_against_the_next_shard() -> None:
    refusal = budget_refusal(need=600, limit=1_024, held=30, reserve=256, pending=200)
    assert refusal is not None and "200 claimed by running shards" in refusal


def test_the_process_figures_are_read_from_the_kernel() -> None:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert descriptor_limit() == soft
    held = descriptors_open()
    with open(__file__, "rb"):
        assert descriptors_open() == held + 1


def test_a_claim_is_held_until_its_shard_ends_and_refuses_what_does_not_fit() -> None:
    budget = DescriptorBudget(reserve=0)
    room = descriptor_limit() - descriptors_open()
    with budget.claim(room // 2, pool_open=0):
        assert budget.claimed == room // 2
        # Nothing of the first claim is open yet: it is still owed to that shard.
        with pytest.raises(DescriptorBudgetExceeded, match="claimed by running shards"):
            budget.claim(room - room // 4, pool_open=0)
        assert budget.claimed == room // 2
    assert budget.claimed == 0
    with budget.claim(room - room // 4, pool_open=0):
        pass
