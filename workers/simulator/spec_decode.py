"""Speculative decoding as the simulator's ``/metrics`` counts it (``simulate.
spec_decode_acceptance``, docs/telemetry.md).

vLLM's engine drafts ``k`` tokens per decode step, verifies them in one forward pass and
emits the accepted ones plus one token of its own (the bonus token); its counters are the
drafts, the draft tokens and the accepted tokens. The simulator draws the same counts for
the tokens it sends: each draft token is accepted with the configured probability (a
seeded RNG of its own, so fault draws do not change), and a draft covers its accepted
tokens plus one. So the draft acceptance rate (accepted / draft tokens) converges to the
configured one and the mean accepted length (1 + accepted / drafts) to ``1 + k × rate``.
Only the counters are modelled: token timing does not change.
"""

from __future__ import annotations

import random


class SpecDecodeCounters:
    """vLLM's speculative-decoding counters over the tokens an endpoint decoded."""

    def __init__(self, acceptance: float, tokens: int, seed: int = 0) -> None:
        self.acceptance = acceptance
        self.tokens = tokens
        self.drafts = 0
        self.draft_tokens = 0
        self.accepted_tokens = 0
        self._rng = random.Random(f"spec-decode:{seed}")
        self._covered = 0  # tokens of steps drawn and not yet decoded

    def decoded(self, count: int) -> None:
        """Account ``count`` decoded tokens (a request's first token comes from its
        prefill, not from a draft: the caller leaves it out)."""
        while self._covered < count:
            accepted = sum(self._rng.random() < self.acceptance for _ in range(self.tokens))
            self.drafts += 1
            self.draft_tokens += self.tokens
            self.accepted_tokens += accepted
            self._covered += accepted + 1
        self._covered -= count
