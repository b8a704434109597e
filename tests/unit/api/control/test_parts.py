"""How a load level is split into parts: even splits, never more streams, parts or
in-flight slots than the level has requests for."""

from __future__ import annotations

from api.control.parts import closed_parts, closed_streams, open_cap, open_parts, split


def test_split_is_even() -> None:
    assert split(10, 3) == [4, 3, 3]
    assert sum(split(1000, 7)) == 1000


def test_a_closed_loop_never_runs_more_streams_than_it_has_requests() -> None:
    assert closed_streams(100_000, 2) == 2
    assert closed_streams(8, 50) == 8
    assert closed_streams(100_000, None) == 100_000  # bounded by duration: all of them
    assert closed_parts(100_000, 2, 512) == 1


def test_an_open_loop_cap_is_never_above_its_requests() -> None:
    assert open_cap(100_000, 2) == 2
    assert open_cap(64, None) == 64
    assert open_parts(100_000, 100_000, 2, 512, 200.0) == 2


def test_a_level_is_split_over_a_regions_processes_in_parts_of_a_useful_size() -> None:
    assert closed_parts(256, None, 512, workers=4) == 4  # 64 streams each
    assert closed_parts(100, None, 512, workers=4) == 1  # 25 each would be too small
    assert open_parts(100.0, None, None, 512, 200.0, workers=8) == 4  # 25 req/s each
