"""Which idle simulated endpoints the pool stops (pure logic of workers/simulator/pool.py)."""

from __future__ import annotations

from workers.simulator.pool import idle_to_stop


def test_endpoints_idle_past_the_timeout_are_stopped_and_held_ones_never() -> None:
    state = {"held": (2, 0.0), "old": (0, 10.0), "fresh": (0, 95.0)}
    assert idle_to_stop(state, now=100.0, idle_s=60.0, room_needed=0) == ["old"]


def test_room_under_the_cap_takes_the_longest_idle_first() -> None:
    state = {"a": (0, 50.0), "b": (0, 20.0), "c": (0, 80.0), "held": (1, 0.0)}
    assert idle_to_stop(state, now=90.0, idle_s=float("inf"), room_needed=2) == ["b", "a"]


def test_expired_endpoints_count_towards_the_room_needed() -> None:
    state = {"a": (0, 0.0), "b": (0, 85.0)}
    assert idle_to_stop(state, now=90.0, idle_s=60.0, room_needed=1) == ["a"]
    assert idle_to_stop(state, now=90.0, idle_s=60.0, room_needed=2) == ["a", "b"]


def test_nothing_to_stop_when_every_endpoint_is_in_use() -> None:
    state = {"a": (1, 0.0), "b": (3, 0.0)}
    assert idle_to_stop(state, now=1e9, idle_s=1.0, room_needed=5) == []
