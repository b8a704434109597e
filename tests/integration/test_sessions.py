"""Multi-turn sessions through a real `tokenbench run` (embedded Redis, a real worker,
DuckDB): against the simulator in closed and open loop, with and without its prefix
cache; against a recording chat server, to see what each turn sends; and a replayed
session log, whose turns keep their order and captured gaps."""

from __future__ import annotations

import itertools
import json
import os
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest
import yaml

from scenarios.model import Scenario
from tests.conftest import CliResult
from tests.fakes.chat_recorder import ChatRecorder, Received
from workers.load.session_plans import session_planner
from workers.prompts.plan import WordPrompts

pytestmark = pytest.mark.integration


@pytest.fixture
def recorder() -> Iterator[ChatRecorder]:
    server = ChatRecorder().start()
    yield server
    server.stop()


def _run(
    tokenbench: Callable[..., CliResult], tmp_path: Path, scenario: dict[str, Any]
) -> tuple[dict[str, Any], duckdb.DuckDBPyConnection]:
    path = tmp_path / "sessions.yaml"
    path.write_text(yaml.safe_dump(scenario))
    db = tmp_path / "sessions.duckdb"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENBENCH__")}
    result = tokenbench("run", str(path), "--db", str(db), "--format", "json", env=env)
    assert result.code == 0, result.stderr
    report = json.loads(result.stdout[result.stdout.index("{") :])
    assert report["state"] == "finished"
    return report, duckdb.connect(str(db), read_only=True)


def _records(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    cursor = con.execute(
        "SELECT provider, session_id, turn, session_turns, context_tokens, session_end, "
        "planned_prompt_tokens, planned_output_tokens, prompt_tokens, completion_tokens, "
        "ttft_ms, itl_ns, status, epoch_ns(intended_start_at) AS intended, "
        "epoch_ns(end_at) AS ended FROM requests ORDER BY provider, session_id, turn"
    )
    names = [d[0] for d in cursor.description or []]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _sessions(records: list[dict[str, Any]]) -> dict[tuple[str, int], list[dict[str, Any]]]:
    sessions: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for row in records:
        sessions[(row["provider"], row["session_id"])].append(row)
    return sessions


FAST = {"ttft_ms": 5, "itl_ms": 1, "prefill_ms_per_token": 1.0}
LOADS = {
    "closed": {"concurrency": [2], "sessions_per_level": 4},
    "open": {"rate": {"rps": [4], "arrival": "poisson"}, "sessions_per_level": 4},
}


@pytest.mark.parametrize("shape", sorted(LOADS))
def test_sessions_grow_their_context_and_a_prefix_cache_keeps_later_turns_fast(
    shape: str, tmp_path: Path, tokenbench: Callable[..., CliResult]
) -> None:
    scenario = {
        "name": f"sessions-{shape}",
        "seed": 11,
        "providers": [
            {"name": "cached", "kind": "simulated", "simulate": {**FAST, "prefix_cache": True}},
            {"name": "uncached", "kind": "simulated", "simulate": FAST},
        ],
        "workload": {
            "mix": [
                {
                    "prompt_tokens": {"dist": "uniform", "min": 16, "max": 32},
                    "output_tokens": {"dist": "fixed", "value": 32},
                }
            ],
            # A system-prompt-like start every session shares: most of turn 1's prompt.
            "shared_prefix_tokens": 300,
            "sessions": {"turns": 3, "think_time": 0.01},
        },
        "load": LOADS[shape],
    }
    report, con = _run(tokenbench, tmp_path, scenario)
    records = _records(con)
    assert len(records) == 2 * 4 * 3 and all(r["status"] == "ok" for r in records)
    sessions = _sessions(records)
    assert len(sessions) == 8
    for turns in sessions.values():
        assert [t["turn"] for t in turns] == [1, 2, 3]
        assert [t["session_end"] for t in turns] == [None, None, "done"]
        assert turns[0]["context_tokens"] == 0
        for earlier, later in itertools.pairwise(turns):
            # The earlier turn's whole prompt and its answer (usage) are the context.
            answer = earlier["completion_tokens"]
            assert later["context_tokens"] == earlier["planned_prompt_tokens"] + answer
            # The simulator counts one token a word: what it received is what was planned.
            assert later["prompt_tokens"] == later["planned_prompt_tokens"]
            assert later["intended"] >= earlier["ended"]  # after the answer (and think time)
    # Providers got the same planned turns (their answers have the planned length too).
    by_provider = {
        p: [
            (r["session_id"], r["turn"], r["planned_prompt_tokens"])
            for r in records
            if r["provider"] == p
        ]
        for p in ("cached", "uncached")
    }
    assert by_provider["cached"] == by_provider["uncached"]

    # The report's by-turn rows are the records' figures (numpy's linear percentiles).
    rows = {(row["provider"], row["turn"]): row for row in report["session_turns"]}
    assert len(rows) == 6
    for (provider, turn), row in rows.items():
        mine = [r for r in records if r["provider"] == provider and r["turn"] == turn]
        ttft = np.array([r["ttft_ms"] for r in mine])
        gaps = np.concatenate([np.array(r["itl_ns"], dtype=np.int64) for r in mine]) / 1e6
        assert row["requests"] == row["ok"] == len(mine) == 4
        assert row["ttft_p50_ms"] == pytest.approx(np.percentile(ttft, 50))
        assert row["ttft_p99_ms"] == pytest.approx(np.percentile(ttft, 99))
        assert row["itl_p50_ms"] == pytest.approx(np.percentile(gaps, 50))
        assert row["context_tokens_mean"] == pytest.approx(
            np.mean([r["context_tokens"] for r in mine])
        )
    (first, second) = sorted(report["sessions"], key=lambda s: s["provider"])
    for summary in (first, second):
        assert summary["sessions"] == 4 and summary["ended_done"] == 4
        assert summary["turns_mean"] == summary["turns_planned_mean"] == 3

    # Later turns resend ~400 tokens of conversation: without a cache all of it is
    # prefilled (1 ms a token), with one only the new message and the answer's last block.
    for turn in (2, 3):
        cached, uncached = rows[("cached", turn)], rows[("uncached", turn)]
        assert cached["ttft_p50_ms"] < uncached["ttft_p50_ms"] / 2
        assert cached["context_tokens_mean"] == uncached["context_tokens_mean"] > 300


def _body_text(received: Received) -> str:
    return str(received.body["messages"][0]["content"])


def test_each_turn_sends_the_conversation_with_the_answers_the_server_gave(
    tmp_path: Path, tokenbench: Callable[..., CliResult], recorder: ChatRecorder
) -> None:
    scenario = {
        "name": "sessions-recorded",
        "seed": 5,
        "providers": [{"name": "rec", "kind": "openai", "base_url": recorder.url, "model": "m"}],
        "workload": {
            "mix": [
                {
                    "prompt_tokens": {"dist": "uniform", "min": 8, "max": 16},
                    "output_tokens": {"dist": "fixed", "value": 6},
                }
            ],
            "sessions": {
                "turns": {"dist": "uniform", "min": 2, "max": 5},
                "think_time": {"dist": "exponential", "mean": 0.02},
                "max_context_tokens": 64,
            },
            "calibrate": False,
        },
        "load": {"rate": {"rps": [20]}, "sessions_per_level": 10},
    }
    _, con = _run(tokenbench, tmp_path, scenario)
    records = _records(con)
    sessions = _sessions(records)
    assert len(sessions) == 10
    assert len(recorder.received) == len(records)

    # Group what the server received by conversation: its first user message.
    conversations: dict[str, list[Received]] = defaultdict(list)
    for received in recorder.received:
        conversations[_body_text(received)].append(received)
    assert len(conversations) == 10
    for bodies in conversations.values():
        for index, received in enumerate(bodies):
            assert len(received.body["messages"]) == 2 * index + 1
        for earlier, later in itertools.pairwise(bodies):
            # Turn n + 1 is turn n's conversation, the answer turn n got, a new message.
            expected = [*earlier.body["messages"], {"role": "assistant", "content": earlier.answer}]
            assert later.body["messages"][:-1] == expected
            assert later.body["messages"][-1]["role"] == "user"

    # The cap: every turn sent fits it; a session ended by it would not have fitted its
    # next planned turn (the plan is the seed's, recomputed here).
    plan = session_planner(Scenario.model_validate(scenario).workload, 5, 0, WordPrompts())
    ends = defaultdict(int)
    for (_, session_id), turns in sessions.items():
        planned = plan(session_id)
        assert [t["turn"] for t in turns] == list(range(1, len(turns) + 1))
        assert all(t["session_turns"] == planned.turns for t in turns)
        for t in turns[1:]:
            assert t["planned_prompt_tokens"] + t["planned_output_tokens"] <= 64
        last = turns[-1]
        ends[last["session_end"]] += 1
        if last["session_end"] == "context_cap":
            following = planned.plan_turn(len(turns))
            context = last["planned_prompt_tokens"] + last["completion_tokens"]
            assert context + following.prompt_tokens + following.output_tokens > 64
        else:
            assert last["session_end"] == "done" and len(turns) == planned.turns
    assert ends["done"] and ends["context_cap"]  # the seed gives both


def test_a_replayed_session_log_keeps_its_turns_in_order(
    tmp_path: Path, tokenbench: Callable[..., CliResult], recorder: ChatRecorder
) -> None:
    log = tmp_path / "log.jsonl"
    lines = []
    for session in range(4):
        conversation: list[dict[str, str]] = []
        for turn in range(3):
            conversation.append({"role": "user", "content": f"s{session} t{turn} " + "w " * 10})
            lines.append(
                {
                    "timestamp": 50.0 + 0.03 * session + 0.2 * turn,
                    "session_id": f"conv-{session}",
                    "turn": turn,
                    "messages": list(conversation),
                    "max_tokens": 4,
                }
            )
            conversation.append({"role": "assistant", "content": f"captured {session}.{turn}"})
    lines.append({"timestamp": 50.05, "prompt": "a request of no session", "max_tokens": 2})
    # Written out of order: the log is sorted by timestamp, sessions by turn.
    log.write_text("".join(json.dumps(line) + "\n" for line in reversed(lines)))
    scenario = {
        "name": "replayed-sessions",
        "providers": [{"name": "rec", "kind": "openai", "base_url": recorder.url, "model": "m"}],
        "workload": {"replay": {"path": str(log), "time_scale": 0.5}},
        "load": {},
    }
    report, con = _run(tokenbench, tmp_path, scenario)
    records = _records(con)
    assert len(records) == len(recorder.received) == 13
    # Each turn sent its captured messages as captured, after the previous turn's answer.
    by_conversation: dict[str, list[Received]] = defaultdict(list)
    for received in recorder.received:
        by_conversation[_body_text(received).split()[0]].append(received)
    for session in range(4):
        bodies = by_conversation[f"s{session}"]
        captured = [
            line["messages"] for line in lines if line.get("session_id") == f"conv-{session}"
        ]
        assert [b.body["messages"] for b in bodies] == captured
    sessions = _sessions(records)
    assert sorted(len(turns) for turns in sessions.values()) == [1, 3, 3, 3, 3]
    for turns in sessions.values():
        assert [t["turn"] for t in turns] == list(range(1, len(turns) + 1))
        assert turns[-1]["session_end"] == "done"
        for earlier, later in itertools.pairwise(turns):
            assert later["intended"] >= earlier["ended"]
            # The captured 0.2 s gap at time_scale 0.5, from the earlier turn's intent.
            assert later["intended"] - earlier["intended"] >= 100_000_000 - 1
        if len(turns) == 3:
            # Context: the captured conversation before each turn's last message.
            assert (
                turns[0]["context_tokens"]
                == 0
                < turns[1]["context_tokens"]
                < turns[2]["context_tokens"]
            )
    assert [row["turn"] for row in report["session_turns"]] == [1, 2, 3]
