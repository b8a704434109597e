"""Which requests the gateway samples: by a hash of the messages, a body field or a header."""

from __future__ import annotations

import random

from workers.gateway.sampling import Sampler, hash_fraction, messages_digest


def test_hash_sampling_is_deterministic_and_near_the_rate() -> None:
    sampler = Sampler(0.2, "messages", "salt")
    bodies = [{"messages": [{"role": "user", "content": f"q{n}"}]} for n in range(5000)]
    first = [sampler.decide(body, {}) for body in bodies]
    assert first == [sampler.decide(body, {}) for body in bodies]
    # 5000 draws at p = 0.2: sd 0.0057; 0.03 is > 5 sd (fails < 1 in 10^6 for a fair hash).
    assert abs(sum(first) / len(first) - 0.2) < 0.03
    expected = [hash_fraction(messages_digest(body["messages"], "salt")) < 0.2 for body in bodies]
    assert first == expected


def test_sampling_by_body_field_and_header() -> None:
    by_user = Sampler(0.5, "body:user", "")
    decisions = {by_user.decide({"user": "alice", "messages": [n]}, {}) for n in range(50)}
    assert len(decisions) == 1  # the same user is always in or always out
    by_header = Sampler(0.5, "header:x-session", "")
    assert by_header.value({}, {"x-session": "s1"}) == b"s1"
    assert by_header.value({}, {}) is None  # absent: a random draw
    assert Sampler(0.0, None, "").decide({}, {}) is False
    assert Sampler(1.0, None, "").decide({}, {}) is True
    draws = Sampler(0.3, None, "", random.Random(1))
    share = sum(draws.decide({}, {}) for _ in range(5000)) / 5000
    assert abs(share - 0.3) < 0.04
