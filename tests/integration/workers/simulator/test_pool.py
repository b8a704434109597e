"""The pool of simulated endpoints with real simulator processes: shared, leased, stopped
when idle, capped, restarted on next use, their egress trust withdrawn when they stop."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import psutil
import pytest

from scenarios.providers.kinds import OpenAIProvider, SimulatedProvider
from tests.support.hostile_tokenizer import hostile_tokenizer
from workers.simulator import pool as pool_module
from workers.simulator.pool import SimulatorCapReached, SimulatorPool

pytestmark = pytest.mark.integration


def provider(ttft_ms: int, name: str = "sim") -> SimulatedProvider:
    return SimulatedProvider.model_validate(
        {"name": name, "kind": "simulated", "simulate": {"ttft_ms": ttft_ms, "itl_ms": 1}}
    )


def _simulators() -> list[psutil.Process]:
    """This process's simulator children (a session's workers run theirs one level down)."""
    found = []
    for child in psutil.Process().children():
        try:
            if child.is_running() and "workers.simulator" in child.cmdline():
                found.append(child)
        except psutil.NoSuchProcess:
            continue
    return found


_BEFORE: set[int] = set()


@pytest.fixture(autouse=True)
def _simulators_before() -> None:
    """Simulators this process already runs (a session fixture's endpoint, say)."""
    _BEFORE.clear()
    _BEFORE.update(child.pid for child in _simulators())


def children() -> list[psutil.Process]:
    """The simulators the test's own pool started, and that still run."""
    return [child for child in _simulators() if child.pid not in _BEFORE]


async def until(condition: Callable[[], bool], timeout_s: float = 60.0) -> None:
    """Poll ``condition`` (never a fixed sleep: the machine is loaded)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.05)


async def answers(url: str) -> bool:
    async with httpx.AsyncClient(timeout=10) as client:
        return (await client.get(f"{url}/models")).status_code == 200


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(test())


def test_identical_configurations_share_one_process_and_an_idle_one_stops() -> None:
    started: list[int] = []
    stopped: list[int] = []

    async def scenario() -> None:
        pool = SimulatorPool(
            on_start=lambda _, port: started.append(port),
            on_stop=lambda _, port: stopped.append(port),
            idle_s=0.5,
        )
        try:
            async with pool.lease(provider(5, "a")) as first, pool.lease(provider(5, "b")) as same:
                assert first == same and first is not None
                assert pool.running == 1
                assert await answers(first)
            # Released by both: stopped once idle, its trust withdrawn.
            await until(lambda: pool.running == 0)
            assert stopped == started and len(started) == 1
            # Used again: started again (a new process, announced again).
            async with pool.lease(provider(5)) as again:
                assert again is not None and await answers(again)
                assert len(started) == 2
        finally:
            await pool.close()
        assert pool.running == 0
        assert sorted(stopped) == sorted(started)

    run(scenario)
    assert children() == []


def test_a_held_endpoint_is_never_stopped_for_idleness() -> None:
    async def scenario() -> None:
        pool = SimulatorPool(idle_s=0.2)
        try:
            async with pool.lease(provider(5)) as held:
                assert held is not None
                # Another configuration comes and goes: its idle stop leaves ours alone.
                async with pool.lease(provider(6)):
                    pass
                await until(lambda: pool.running == 1)
                assert await answers(held)
        finally:
            await pool.close()

    run(scenario)


def test_the_cap_refuses_one_more_in_use_and_makes_room_from_idle_ones() -> None:
    async def scenario() -> None:
        pool = SimulatorPool(idle_s=3600, max_processes=2)
        try:
            async with pool.lease(provider(5)), pool.lease(provider(6)):
                with pytest.raises(SimulatorCapReached, match="TOKENBENCH__WORKER__MAX_SIMULATORS"):
                    async with pool.lease(provider(7)):
                        pass
                assert pool.running == 2
            # Both idle now (not yet timed out): a third configuration takes the place
            # of the longest idle one.
            async with pool.lease(provider(7)) as third:
                assert third is not None and await answers(third)
                assert pool.running == 2
        finally:
            await pool.close()

    run(scenario)
    assert children() == []


def test_a_simulator_that_died_is_started_again_on_next_use() -> None:
    async def scenario() -> None:
        pool = SimulatorPool()
        try:
            async with pool.lease(provider(5)) as first:
                assert first is not None
            (child,) = children()
            child.kill()
            await until(lambda: pool.running == 0)  # the pool has seen it exit
            async with pool.lease(provider(5)) as second:
                assert second is not None and await answers(second)
            assert pool.running == 1
        finally:
            await pool.close()

    run(scenario)
    assert children() == []


def test_other_providers_hold_nothing() -> None:
    async def scenario() -> None:
        pool = SimulatorPool()
        real = OpenAIProvider.model_validate(
            {"name": "o", "kind": "openai", "base_url": "https://api.example.com/v1", "model": "m"}
        )
        async with pool.lease(real) as endpoint:
            assert endpoint is None
        assert pool.running == 0
        await pool.close()

    run(scenario)


def test_a_refused_prompt_tokenizer_fails_the_start_with_its_reason(tmp_path: Path) -> None:
    path = tmp_path / "tokenizer.json"
    path.write_bytes(hostile_tokenizer("simulator"))
    hostile = SimulatedProvider.model_validate(
        {
            "name": "sim",
            "kind": "simulated",
            "simulate": {"ttft_ms": 5, "prompt_tokenizer": {"path": str(path)}},
        }
    )

    async def scenario() -> None:
        pool = SimulatorPool()
        try:
            with pytest.raises(RuntimeError, match=r"failed to start: .*refused") as failed:
                async with pool.lease(hostile):
                    pass
            assert str(path) in str(failed.value)
            assert pool.running == 0
        finally:
            await pool.close()

    run(scenario)
    assert children() == []


def test_close_waits_for_a_stop_the_idle_reaper_began(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reaper, cancelled by close() while it stops an idle endpoint, leaves that stop
    running (shielded); close() waits for it, so no simulator outlives its pool (else a
    process still running when the loop ends: a ResourceWarning, and a stray process)."""
    real_terminate = pool_module._terminate
    stopping = asyncio.Event()

    async def slow_terminate(process: asyncio.subprocess.Process) -> None:
        stopping.set()
        await asyncio.sleep(0.5)  # the close() below lands inside this stop
        await real_terminate(process)

    monkeypatch.setattr(pool_module, "_terminate", slow_terminate)

    async def scenario() -> asyncio.subprocess.Process:
        pool = SimulatorPool(idle_s=0.01)
        async with pool.lease(provider(5)):
            (endpoint,) = pool._endpoints.values()
        await asyncio.wait_for(stopping.wait(), 30)  # the reaper is stopping it
        await pool.close()
        return endpoint.process

    process = asyncio.run(scenario())
    assert process.returncode is not None  # reaped before the loop ended
