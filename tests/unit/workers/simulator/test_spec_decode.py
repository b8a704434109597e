"""The simulator's speculative-decoding counters (workers/simulator/spec_decode.py): drafts
cover the tokens decoded, the acceptance rate converges to the configured one, and the
draws are seeded."""

from __future__ import annotations

import pytest

from workers.simulator.spec_decode import SpecDecodeCounters


@pytest.mark.parametrize("acceptance", [0.0, 0.3, 0.8, 1.0])
def test_the_acceptance_rate_converges_to_the_configured_one(acceptance: float) -> None:
    counters = SpecDecodeCounters(acceptance, tokens=4, seed=7)
    for _ in range(5_000):
        counters.decoded(3)
    assert counters.draft_tokens == 4 * counters.drafts
    assert counters.accepted_tokens / counters.draft_tokens == pytest.approx(acceptance, abs=0.02)
    # Each draft emits its accepted tokens plus one: together they cover what was decoded,
    # the last draft perhaps only in part.
    emitted = counters.accepted_tokens + counters.drafts
    assert 0 <= emitted - 15_000 <= 4
    mean_length = 1 + counters.accepted_tokens / counters.drafts
    assert mean_length == pytest.approx(1 + 4 * acceptance, abs=0.1)


def test_nothing_decoded_draws_nothing_and_draws_are_seeded() -> None:
    idle = SpecDecodeCounters(0.5, tokens=3)
    idle.decoded(0)
    assert (idle.drafts, idle.draft_tokens, idle.accepted_tokens) == (0, 0, 0)
    runs = []
    for _ in range(2):
        counters = SpecDecodeCounters(0.5, tokens=3, seed=1)
        for count in (1, 5, 2, 9):
            counters.decoded(count)
        runs.append((counters.drafts, counters.accepted_tokens))
    assert runs[0] == runs[1]
