"""Bounds of scenarios/limits.py: every field refuses what is above its bound (naming its
path), planning is linear and capped, run creation is all-or-nothing, SQL answers are
capped as they are encoded, and docs/security.md lists every bound."""

from __future__ import annotations

import copy
import itertools
import json
import math
import re
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from pydantic import ValidationError

from analytics.query.safe_sql import SqlLimits, SqlTooLarge, encode, encode_capped, run_query
from analytics.store.db import connect
from analytics.store.runs import PlannedShard, RunStore, transaction
from api.control.parts import closed_parts, split
from api.control.planner import plan_run
from api.schemas import RunCreate, RunOverrides
from scenarios import limits
from scenarios.loader import ScenarioError, validate_scenario
from scenarios.model import Scenario
from tests.support.paths import REPO

DOCS = REPO / "docs" / "security.md"


def base() -> dict[str, Any]:
    """A small valid scenario as decoded JSON."""
    return {
        "name": "bounds",
        "providers": [{"name": "sim", "kind": "simulated"}],
        "workload": {
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": 4},
                    "output_tokens": {"dist": "fixed", "value": 2},
                }
            ]
        },
        "load": {"concurrency": [1], "requests_per_level": 2},
    }


def with_value(path: str, value: Any) -> dict[str, Any]:
    """``base()`` with the value at a dotted path replaced (list indices as numbers)."""
    data = base()
    *parents, last = path.split(".")
    node: Any = data
    for part in parents:
        node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
    if last.isdigit():
        node[int(last)] = value
    else:
        node[last] = value
    return data


def problems(data: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ScenarioError) as caught:
        validate_scenario(data)
    return {p.path: p.message for p in caught.value.problems}


# --------------------------------------------------------------------------- fields

OVER = [
    ("load.concurrency.0", limits.MAX_CONCURRENCY + 1),
    ("load.concurrency.0", 1_000_000_000),  # the reproduction
    ("load.requests_per_level", limits.MAX_REQUESTS_PER_LEVEL + 1),
    ("load.requests_per_level", 3_000_000_000),  # the reproduction
    ("load.duration_s", limits.MAX_DURATION_S + 1),
    ("load.warmup_s", limits.MAX_DURATION_S + 1),
    ("workload.mix.0.prompt_tokens.value", limits.MAX_TOKENS + 1),
    ("workload.mix.0.prompt_tokens.value", 10_000_000),  # the reproduction
    ("workload.mix.0.output_tokens.value", limits.MAX_TOKENS + 1),
    ("workload.shared_prefix_tokens", limits.MAX_TOKENS + 1),
    ("workload.mix.0.weight", limits.MAX_WEIGHT * 2),
    ("providers.0.timeout_s", limits.MAX_REQUEST_TIMEOUT_S + 1),
    ("providers.0.stall_timeout_s", limits.MAX_REQUEST_TIMEOUT_S + 1),
    ("providers.0.connect_timeout_s", limits.MAX_CONNECT_TIMEOUT_S + 1),
    ("providers.0.simulate.ttft_ms", limits.MAX_LATENCY_MS + 1),
    ("providers.0.simulate.tokens_per_chunk", limits.MAX_TOKENS_PER_CHUNK + 1),
    ("providers.0.simulate.seed", limits.MAX_SEED + 1),
    ("seed", limits.MIN_SEED - 1),
    ("description", "x" * (limits.MAX_TEXT_CHARS + 1)),
    ("slo.ttft_ms", limits.MAX_LATENCY_MS + 1),
    ("providers.0.simulate.prefill_ms_per_token", limits.MAX_LATENCY_MS + 1),
    ("providers.0.simulate.prefix_cache_words", limits.MAX_CONTEXT_TOKENS + 1),
    ("providers.0.simulate.spec_decode_tokens", limits.MAX_SPEC_DECODE_TOKENS + 1),
    ("providers.0.simulate.spec_decode_acceptance", 1.5),
    ("providers.0.simulate.gpu_idle_watts", limits.MAX_GPU_WATTS + 1),
    ("providers.0.simulate.gpu_max_watts", limits.MAX_GPU_WATTS + 1),
    ("providers.0.metrics_interval_s", limits.MAX_METRICS_INTERVAL_S + 1),
    ("providers.0.metrics_interval_s", limits.MIN_METRICS_INTERVAL_S / 2),
    ("providers.0.metrics_url", "/" + "m" * limits.MAX_URL_CHARS),
]


@pytest.mark.parametrize(("path", "value"), OVER)
def test_a_value_above_its_bound_is_refused_at_its_path(path: str, value: Any) -> None:
    found = problems(with_value(path, value))
    assert path in found, found


@pytest.mark.parametrize(
    "path",
    [
        "load.duration_s",
        "providers.0.timeout_s",
        "workload.mix.0.weight",
        "providers.0.simulate.itl_ms",
        "slo.e2e_ms",
    ],
)
@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_infinity_and_nan_are_refused_everywhere(path: str, value: float) -> None:
    found = problems(with_value(path, value))
    assert found.get(path) == "Input should be a finite number", found


def test_rates_are_finite_and_bounded() -> None:
    for rps in (math.inf, math.nan, limits.MAX_RPS * 2):
        data = with_value("load", {"rate": {"rps": [1, rps]}, "duration_s": 1})
        assert "load.rate.rps.1" in problems(data)
    data = with_value("load", {"rate": {"rps": [1], "burstiness": 0.0}, "duration_s": 1})
    assert "load.rate.burstiness" in problems(data)


@pytest.mark.parametrize(
    ("path", "items", "cap"),
    [
        ("load.concurrency", [1], limits.MAX_LEVELS),
        ("workload.mix", None, limits.MAX_MIX_CLASSES),
        ("regions", None, limits.MAX_REGIONS),
        ("providers", None, limits.MAX_PROVIDERS),
    ],
)
def test_lists_are_bounded(path: str, items: list[Any] | None, cap: int) -> None:
    data = base()
    if path == "regions":
        value: list[Any] = [f"r{i}" for i in range(cap + 1)]
    elif path == "providers":
        value = [{"name": f"p{i}", "kind": "simulated"} for i in range(cap + 1)]
    elif path == "workload.mix":
        value = data["workload"]["mix"] * (cap + 1)
    else:
        value = (items or []) * (cap + 1)
    at_cap = with_value(path, value[:cap])
    validate_scenario(at_cap)  # the bound itself is accepted
    assert path in problems(with_value(path, value))


def test_extra_body_and_replicate_input_are_small_plain_json() -> None:
    openai = {"name": "o", "kind": "openai", "base_url": "http://h/v1", "model": "m"}
    big = {**openai, "extra_body": {"x": "y" * limits.MAX_EXTRA_BODY_BYTES}}
    assert "providers.0.extra_body" in problems(with_value("providers", [big]))
    nan = {**openai, "extra_body": {"temperature": math.nan}}
    assert "finite" in problems(with_value("providers", [nan]))["providers.0.extra_body"]
    replicate = {"name": "r", "kind": "replicate", "model": "a/b", "api_key_env": "REPLICATE_T"}
    keys = {**replicate, "input": {f"k{i}": 1 for i in range(limits.MAX_INPUT_KEYS + 1)}}
    assert "providers.0.input" in problems(with_value("providers", [keys]))
    size = {**replicate, "input": {"prompt": "x" * limits.MAX_EXTRA_BODY_BYTES}}
    assert "providers.0.input" in problems(with_value("providers", [size]))


def test_strings_are_bounded() -> None:
    long_url = "http://h/" + "a" * limits.MAX_URL_CHARS
    openai = {"name": "o", "kind": "openai", "base_url": long_url, "model": "m" * 300}
    found = problems(with_value("providers", [openai]))
    assert {"providers.0.base_url", "providers.0.model"} <= set(found)


def test_total_planned_requests_are_bounded() -> None:
    data = with_value("load", {"concurrency": [1] * 20, "requests_per_level": 10_000_000})
    message = problems(data)[""]
    assert "200,000,000 requests" in message
    assert f"{limits.MAX_TOTAL_REQUESTS:,}" in message
    open_loop = with_value("load", {"rate": {"rps": [100_000]}, "duration_s": 86_400})
    assert "requests" in problems(open_loop)[""]
    # A closed loop bounded only by its duration has no planned count: accepted.
    validate_scenario(with_value("load", {"concurrency": [100_000], "duration_s": 600}))


def test_the_largest_valid_values_are_accepted() -> None:
    data = base()
    data["load"] = {"concurrency": [limits.MAX_CONCURRENCY], "requests_per_level": 10_000_000}
    data["workload"]["mix"][0]["prompt_tokens"] = {"dist": "fixed", "value": limits.MAX_TOKENS}
    data["workload"]["shared_prefix_tokens"] = limits.MAX_TOKENS
    data["seed"] = limits.MAX_SEED
    data["providers"][0]["timeout_s"] = limits.MAX_REQUEST_TIMEOUT_S
    scenario = validate_scenario(data)
    assert scenario.load.concurrency == [limits.MAX_CONCURRENCY]


def test_run_overrides_are_bounded_and_finite() -> None:
    for bad in (
        {"rps": [math.inf]},
        {"rps": [math.nan]},
        {"duration_s": math.inf},
        {"concurrency": [limits.MAX_CONCURRENCY + 1]},
        {"requests_per_level": 3_000_000_000},
        {"regions": [f"r{i}" for i in range(limits.MAX_REGIONS + 1)]},
    ):
        with pytest.raises(ValidationError):
            RunOverrides.model_validate(bad)


def test_a_run_body_keeps_its_scenario_as_data_but_documents_the_schema() -> None:
    body = RunCreate.model_validate({"scenario": {"name": "anything", "bogus": 1}})
    assert body.scenario == {"name": "anything", "bogus": 1}  # validated by the handler
    with pytest.raises(ValidationError):
        RunCreate.model_validate({"scenario": [1, 2]})
    schema = RunCreate.model_json_schema()
    assert "Scenario" in schema["$defs"]


# --------------------------------------------------------------------------- planning


def test_part_starts_are_running_sums() -> None:
    # The planner's running sums equal the former quadratic formula.
    for total, parts in [(3001, 4), (10, 3), (7, 7), (1_000_000, 977)]:
        counts = split(total, parts)
        starts = [0, *itertools.accumulate(counts[:-1])]
        assert starts == [sum(counts[:i]) for i in range(parts)]


def unchecked(data: dict[str, Any], **load: Any) -> Scenario:
    """A scenario whose load bypasses validation (as a stored run could hold)."""
    scenario = validate_scenario(data)
    return scenario.model_copy(update={"load": scenario.load.model_copy(update=load)})


def test_a_billion_users_is_refused_by_the_shard_cap_before_any_shard_is_built() -> None:
    scenario = unchecked(base(), concurrency=[1_000_000_000], requests_per_level=None)
    assert closed_parts(1_000_000_000, None, 512) == 1_953_125
    with pytest.raises(ScenarioError) as caught:
        plan_run("r", scenario)
    (problem,) = caught.value.problems
    assert problem.path == "load.concurrency.0"  # the level that alone is too large
    assert f"more than the {limits.MAX_SHARDS_PER_RUN}" in problem.message
    assert "at most 512 streams" in problem.message


def test_a_valid_scenario_can_still_be_too_many_shards() -> None:
    data = base()
    data["regions"] = [f"r{i}" for i in range(limits.MAX_REGIONS)]
    data["load"] = {"concurrency": [limits.MAX_CONCURRENCY] * 3, "duration_s": 60}
    scenario = validate_scenario(data)
    with pytest.raises(ScenarioError, match="shards"):
        plan_run("r", scenario)


def test_the_largest_plan_within_the_cap_is_planned_with_disjoint_requests() -> None:
    data = base()
    requests = 3_000_000  # x 32 regions: within MAX_TOTAL_REQUESTS
    parts = closed_parts(limits.MAX_CONCURRENCY, requests, 512)
    data["regions"] = [f"r{i}" for i in range(limits.MAX_REGIONS)]
    data["load"] = {"concurrency": [limits.MAX_CONCURRENCY], "requests_per_level": requests}
    (stage,) = plan_run("r", validate_scenario(data))
    assert len(stage.shards) == parts * len(data["regions"]) <= limits.MAX_SHARDS_PER_RUN
    first_region = [s for s in stage.shards if s.region == "r0"]
    ranges = [(s.seq_start, s.seq_start + (s.requests or 0)) for s in first_region]
    assert ranges[0][0] == 0 and ranges[-1][1] == requests
    assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))


# --------------------------------------------------------------------------- DuckDB


def shard(planned: int | None) -> PlannedShard:
    return PlannedShard("s0.sim.local", 0, "sim", "local", 1, planned)


def test_a_failed_run_creation_rolls_back_and_the_connection_stays_writable(
    tmp_path: Path,
) -> None:
    con = connect(tmp_path / "t.duckdb")
    store = RunStore(con)
    scenario = validate_scenario(base())
    with pytest.raises(duckdb.Error):
        store.create_run("bad", scenario, [shard(2**70)])  # past even BIGINT
    assert con.execute("SELECT count(*) FROM runs").fetchone() == (0,)
    con.execute("CREATE OR REPLACE TEMP TABLE probe AS SELECT 1 AS ok")  # what /readyz does
    store.create_run("good", scenario, [shard(3_000_000_000)])  # above INTEGER: BIGINT now
    row = con.execute("SELECT planned_requests FROM shards WHERE run_id = 'good'").fetchone()
    assert row == (3_000_000_000,)


def test_unstarted_shards_are_settled_in_one_statement(tmp_path: Path) -> None:
    con = connect(tmp_path / "t.duckdb")
    store = RunStore(con)
    shards = [PlannedShard(f"s{i}", 0, "sim", "local", 1, 2) for i in range(3)]
    store.create_run("r", validate_scenario(base()), shards)
    store.settle_unstarted("r", ["s0", "s2"], "cancelled", "run cancelled")
    rows = con.execute("SELECT shard_id, state, message FROM shards ORDER BY 1").fetchall()
    assert rows == [
        ("s0", "cancelled", "run cancelled"),
        ("s1", "planned", None),
        ("s2", "cancelled", "run cancelled"),
    ]


def test_count_columns_are_bigint(tmp_path: Path) -> None:
    con = connect(tmp_path / "t.duckdb")
    types = dict(
        con.execute(
            "SELECT table_name || '.' || column_name, data_type FROM information_schema.columns"
        ).fetchall()
    )
    for column in (
        "shards.planned_requests",
        "shards.concurrency",
        "shards.records",
        "shard_attempts.records",
        "shard_attempts.batches",
    ):
        assert types[column] == "BIGINT", column


def test_transaction_rolls_back_every_statement_on_any_exception(tmp_path: Path) -> None:
    con = connect(tmp_path / "t.duckdb")
    con.execute("CREATE TABLE t (x INTEGER)")

    def fails_after_a_write() -> None:
        with transaction(con):
            con.execute("INSERT INTO t VALUES (1)")
            raise RuntimeError("boom")

    def overflows() -> None:
        with transaction(con):
            con.execute("INSERT INTO t VALUES (2)")
            con.execute("INSERT INTO t VALUES (3000000000)")  # aborts the transaction

    with pytest.raises(RuntimeError):
        fails_after_a_write()
    with pytest.raises(duckdb.Error):
        overflows()
    with transaction(con):
        con.execute("INSERT INTO t VALUES (4)")
    assert con.execute("SELECT list(x) FROM t").fetchone() == ([4],)


# --------------------------------------------------------------------------- SQL answers


TABLE = pa.table({"n": list(range(5000)), "s": [f"row {i}" for i in range(5000)]})


@pytest.mark.parametrize("fmt", ["json", "csv", "arrow", "parquet"])
def test_capped_encoding_is_the_plain_encoding_below_the_cap(fmt: str) -> None:
    capped = encode_capped(TABLE, fmt, 10 * 1024 * 1024)
    if fmt == "json":
        assert capped == encode(TABLE, fmt)
    elif fmt == "arrow":
        assert pa.ipc.open_stream(capped).read_all().equals(TABLE)
    elif fmt == "parquet":
        import pyarrow.parquet as pq

        assert pq.read_table(pa.BufferReader(capped)).equals(TABLE)
    else:
        assert capped.decode().splitlines()[1] == '0,"row 0"'
    with pytest.raises(SqlTooLarge, match="TOKENBENCH__API__SQL_MAX_BYTES"):
        encode_capped(TABLE, fmt, 1024)


def test_empty_answers_encode_under_a_cap() -> None:
    assert json.loads(encode_capped(TABLE.slice(0, 0), "json", 1024)) == []


def test_reading_stops_once_the_batches_exceed_the_cap(tmp_path: Path) -> None:
    connect(tmp_path / "q.duckdb").close()
    sql = "SELECT repeat('x', 100000) AS s FROM range(1000)"  # 100 MB if read whole
    with pytest.raises(SqlTooLarge):
        run_query(tmp_path / "q.duckdb", sql, SqlLimits(max_rows=10_000, max_bytes=1_000_000))
    small = run_query(tmp_path / "q.duckdb", sql, SqlLimits(max_rows=5, max_bytes=1_000_000))
    assert small.table.num_rows == 5 and small.truncated


# --------------------------------------------------------------------------- docs


def test_docs_list_every_bound() -> None:
    text = DOCS.read_text()
    section = text[text.index("## Bounds") :]
    section = section[: section.index("\n## ", 1)]
    names = [n for n in dir(limits) if re.fullmatch(r"[A-Z][A-Z_]+", n)]
    missing = [n for n in names if f"`{n}`" not in section]
    assert not missing, f"docs/security.md (Bounds) does not list {missing}"
    assert "TOKENBENCH__API__SQL_MAX_BYTES" in section


def test_each_bound_has_a_reason_in_limits_py() -> None:
    source = Path(limits.__file__).read_text().splitlines()
    for index, line in enumerate(source):
        if re.match(r"[A-Z][A-Z_]+: Final", line):
            above = source[index - 1]
            assert above.startswith("#") or re.match(r"[A-Z][A-Z_]+: Final", above), line


def test_base_scenario_is_valid() -> None:
    assert validate_scenario(copy.deepcopy(base())).name == "bounds"
