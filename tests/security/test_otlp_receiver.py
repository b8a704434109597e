"""The OTLP trace receiver (POST /v1/otlp/v1/traces, docs/traces.md) attacked over
HTTP: bodies past the bound (413), no token (401), a viewer (403), spans for another
team's run or a run long finished (refused), hostile values and 10k spans (counted and
dropped), malformed bodies (400) — never a 500, never a changed record."""

from __future__ import annotations

import datetime as dt
import gzip
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import httpx
import orjson
import pytest
from celery import Celery
from pydantic import SecretStr

from analytics.store.db import connect
from analytics.store.runs import PlannedShard, RunStore
from api.local.redis_server import RedisServer
from api.rest.app import create_app
from api.rest.routes.otlp import TRACES_PATH
from scenarios.limits import MAX_OTLP_BODY_BYTES, MAX_OTLP_SPANS
from scenarios.model import Scenario
from scenarios.settings import ApiSettings, DuckDBSettings, RedisSettings, Settings
from scenarios.wire import otlp
from scenarios.wire.otlp import EncodedSpan
from tests.conftest import API_TOKEN
from tests.support.served_app import served
from tests.support.teams import mint_team_tokens

PATH = TRACES_PATH
PROTOBUF = {"content-type": "application/x-protobuf"}
JSON = {"content-type": "application/json"}
# run id -> (team, provider, finished how long ago; None: running)
RUNS = {
    "otlp-red": ("red", "vllm-red", None),
    "otlp-blue": ("blue", "vllm-blue", None),
    "otlp-red-old": ("red", "vllm-old", dt.timedelta(hours=1)),
}


@dataclass
class Stack:
    base: str
    tokens: dict[str, str]
    con: duckdb.DuckDBPyConnection

    def client(self, caller: str | None) -> httpx.Client:
        headers = {} if caller is None else {"authorization": f"Bearer {self.tokens[caller]}"}
        return httpx.Client(base_url=self.base, headers=headers, timeout=60)

    def spans_of(self, run_id: str) -> list[tuple[Any, ...]]:
        cursor = self.con.cursor()
        try:
            return cursor.execute(
                "SELECT request_id, queue_ns, ttft_ns FROM server_spans WHERE run_id = ? "
                "ORDER BY request_id",
                [run_id],
            ).fetchall()
        finally:
            cursor.close()

    def fingerprint(self) -> tuple[Any, ...]:
        """What a span must never change: records and runs."""
        cursor = self.con.cursor()
        try:
            records = cursor.execute("SELECT count(*) FROM request_records").fetchall()
            runs = cursor.execute(
                "SELECT run_id, state, finished_at FROM runs ORDER BY run_id"
            ).fetchall()
            return (records, runs)
        finally:
            cursor.close()


def _store_runs(db: Path) -> None:
    con = connect(db)
    try:
        now = dt.datetime.now(dt.UTC)
        for run_id, (team, provider, ago) in RUNS.items():
            scenario = Scenario.model_validate(
                {
                    "name": run_id,
                    "providers": [{"name": provider, "kind": "simulated"}],
                    "workload": {
                        "mix": [
                            {
                                "prompt_tokens": {"dist": "fixed", "value": 4},
                                "output_tokens": {"dist": "fixed", "value": 2},
                            }
                        ]
                    },
                    "load": {"concurrency": [1], "requests_per_level": 1},
                    "regions": ["otlp-nowhere"],
                }
            )
            shard = PlannedShard(f"{run_id}-s0", 0, provider, "otlp-nowhere", 1, 1)
            RunStore(con).create_run(run_id, scenario, [shard])
            con.execute(
                "INSERT INTO object_owners VALUES ('run', ?, ?, NULL, NULL, ?)", [run_id, team, now]
            )
            if ago is not None:
                con.execute(
                    "UPDATE runs SET state = 'finished', finished_at = ? WHERE run_id = ?",
                    [now - ago, run_id],
                )
    finally:
        con.close()


@pytest.fixture(scope="module")
def stack(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    db = tmp_path_factory.mktemp("otlp") / "otlp.duckdb"
    tokens = mint_team_tokens(db, API_TOKEN)
    _store_runs(db)
    settings = Settings(
        redis=RedisSettings(url=redis_server.url),
        duckdb=DuckDBSettings(path=db),
        api=ApiSettings(tokens=[SecretStr(API_TOKEN)]),
    )
    app = create_app(settings, Celery("otlp-tests", set_as_current=False))
    with served(app) as base:
        yield Stack(base, tokens, app.state.con)


def _span(request_id: str, **attributes: otlp.Scalar) -> EncodedSpan:
    values: dict[str, otlp.Scalar] = {
        otlp.REQUEST_ID: request_id,
        otlp.TIME_IN_QUEUE: 0.01,
        otlp.TIME_TO_FIRST_TOKEN: 0.05,
        **attributes,
    }
    return EncodedSpan(b"\x01" * 16, b"\x02" * 8, "llm_request", 1, 2, values)


def _body(provider: str, *spans: EncodedSpan) -> bytes:
    return otlp.encode_request({"service.name": provider}, list(spans))


def _rejected(answer: httpx.Response) -> int:
    assert answer.status_code == 200, answer.text
    partial = answer.json().get("partialSuccess", {})
    return int(partial.get("rejectedSpans", 0))


def test_no_token_viewer_and_oversized_body(stack: Stack) -> None:
    body = _body("vllm-red", _span("chatcmpl-anon"))
    with stack.client(None) as anonymous:
        assert anonymous.post(PATH, content=body, headers=PROTOBUF).status_code == 401
    with stack.client("red-viewer") as viewer:
        assert viewer.post(PATH, content=body, headers=PROTOBUF).status_code == 403
    with stack.client("red-submitter") as red:
        big = red.post(PATH, content=b"\x00" * (MAX_OTLP_BODY_BYTES + 1), headers=PROTOBUF)
        assert big.status_code == 413, big.text
        bomb = gzip.compress(b"\x00" * (MAX_OTLP_BODY_BYTES + 10))
        inflated = red.post(PATH, content=bomb, headers={**PROTOBUF, "content-encoding": "gzip"})
        assert inflated.status_code == 413, inflated.text
    assert stack.spans_of("otlp-red") == []


def test_own_run_stored_other_team_and_old_runs_refused(stack: Stack) -> None:
    before = stack.fingerprint()
    with stack.client("red-submitter") as red:
        mine = red.post(PATH, content=_body("vllm-red", _span("chatcmpl-red-1")), headers=PROTOBUF)
        assert mine.status_code == 200 and mine.content == b""  # nothing rejected
        blue = red.post(PATH, content=_body("vllm-blue", _span("chatcmpl-b")), headers=PROTOBUF)
        assert blue.status_code == 200 and b"no run of this team" in blue.content
        # Naming the other team's run outright changes nothing.
        named = _span("chatcmpl-named", **{otlp.RUN_ID: "otlp-blue"})
        assert _rejected(red.post(PATH, json=_json_of("vllm-blue", named))) == 1
        old = red.post(PATH, json=_json_of("vllm-old", _span("chatcmpl-old")))
        assert _rejected(old) == 1
    with stack.client("admin") as admin:
        assert _rejected(admin.post(PATH, json=_json_of("vllm-blue", _span("chatcmpl-adm")))) == 0
    assert stack.spans_of("otlp-red") == [("chatcmpl-red-1", 10_000_000, 50_000_000)]
    assert [row[0] for row in stack.spans_of("otlp-blue")] == ["chatcmpl-adm"]
    assert stack.spans_of("otlp-red-old") == []
    assert stack.fingerprint() == before


def _json_of(provider: str, *spans: EncodedSpan) -> dict[str, Any]:
    def value(item: otlp.Scalar) -> dict[str, Any]:
        if isinstance(item, str):
            return {"stringValue": item}
        if isinstance(item, bool):
            return {"boolValue": item}
        if isinstance(item, int):
            return {"intValue": str(item)}
        return {"doubleValue": item}

    return {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": provider}}]
                },
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": span.trace_id.hex(),
                                "name": span.name,
                                "attributes": [
                                    {"key": k, "value": value(v)}
                                    for k, v in span.attributes.items()
                                ],
                            }
                            for span in spans
                        ]
                    }
                ],
            }
        ]
    }


def test_hostile_values_are_counted_and_dropped(stack: Stack) -> None:
    before = stack.fingerprint()
    hostile = {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": "vllm-red"}}]
                },
                "scopeSpans": [
                    {
                        "spans": [
                            _hostile("h-negative", {"doubleValue": -1.0}),
                            _hostile("h-huge", {"doubleValue": 1e308}),
                            _hostile("h-nan", {"doubleValue": "NaN"}),
                            _hostile("h-string", {"stringValue": "0.5"}),
                            _hostile("h-list", {"arrayValue": {"values": []}}),
                            _hostile("h-int-overflow", {"intValue": "9" * 40}),
                            {"attributes": "not a list"},
                            "not a span",
                        ]
                    }
                ],
            }
        ]
    }
    with stack.client("red-submitter") as red:
        answer = red.post(PATH, content=orjson.dumps(hostile), headers=JSON)
        assert answer.status_code == 400, answer.text  # attributes of the wrong shape
        del hostile["resourceSpans"][0]["scopeSpans"][0]["spans"][-2]
        assert _rejected(red.post(PATH, content=orjson.dumps(hostile), headers=JSON)) == 6
        for bad in (b"\x0a\xff\xff", b"{", b"[" * 100_000, b"\x00" * 64):
            media = JSON if bad[:1] in (b"{", b"[") else PROTOBUF
            refused = red.post(PATH, content=bad, headers=media)
            assert refused.status_code == 400, (bad[:8], refused.text)
        wrong = red.post(PATH, content=b"x", headers={"content-type": "text/plain"})
        assert wrong.status_code == 415, wrong.text
        many = [_span(f"chatcmpl-many-{i}") for i in range(10_000)]
        flood = red.post(PATH, content=_body("vllm-red", *many), headers=PROTOBUF)
        assert flood.status_code == 200, flood.text
        assert b"more than" in flood.content
    stored = {row[0] for row in stack.spans_of("otlp-red")}
    assert not any(rid.startswith("h-") for rid in stored)
    assert len({rid for rid in stored if rid.startswith("chatcmpl-many-")}) == MAX_OTLP_SPANS
    cursor = stack.con.cursor()
    try:
        receipts = cursor.execute(
            "SELECT spans, stored, refused, dropped FROM server_span_receipts "
            "WHERE team = 'red' AND spans = 10000"
        ).fetchall()
    finally:
        cursor.close()
    assert receipts == [(10_000, MAX_OTLP_SPANS, 0, 10_000 - MAX_OTLP_SPANS)]
    assert stack.fingerprint() == before
    assert httpx.get(f"{stack.base}/healthz", timeout=10).status_code == 200


def _hostile(request_id: str, queue: dict[str, Any]) -> dict[str, Any]:
    return {
        "attributes": [
            {"key": "gen_ai.request.id", "value": {"stringValue": request_id}},
            {"key": "gen_ai.latency.time_in_queue", "value": queue},
        ]
    }
