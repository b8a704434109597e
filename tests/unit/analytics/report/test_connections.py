"""Connections and ids per stage (analytics/report/connections.py) from real records in
DuckDB: new vs reused counts, percentiles of the phases against numpy, TTFT of
first-on-connection requests vs the rest, and the shares of records with ids."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from analytics.report.build import build_report
from analytics.report.connections import CONNECTION_FIELDS
from analytics.report.stored import ExactLimits
from analytics.store.db import connect
from tests.support.analytics_builders import MS, S, failed_result, ok_result, scenario, store_run
from workers.client.errors import ErrorClass
from workers.client.result import RequestResult

PROVIDERS = [{"name": name, "kind": "simulated", "model": "m"} for name in ("tls", "other")]


def _opened(result: RequestResult, dns: float, connect: float, tls: float) -> RequestResult:
    """``result`` as the first request on a connection it opened: phases in ms after sent."""
    at = result.sent
    result.phases.dns_start, result.phases.dns_end = at, at + round(dns * MS)
    result.phases.connect_start = result.phases.dns_end
    result.phases.connect_end = result.phases.connect_start + round(connect * MS)
    result.phases.tls_start, result.phases.tls_end = (
        result.phases.connect_end,
        result.phases.connect_end + round(tls * MS),
    )
    result.phases.request_written = result.phases.tls_end
    result.phases.connection_new = True
    return result


def _reused(result: RequestResult) -> RequestResult:
    result.phases.request_written = result.sent + MS // 10
    result.phases.connection_new = False
    return result


# Four connections opened (slower first requests), twelve reused, one failed connect.
PHASES = [(1.0, 2.0, 8.0), (1.5, 2.5, 9.0), (2.0, 3.0, 11.0), (3.0, 6.0, 20.0)]
NEW_TTFT = [60.0, 62.0, 70.0, 90.0]
REUSED_TTFT = [40.0 + i for i in range(12)]


def _tls_results() -> list[RequestResult]:
    results = [
        _opened(ok_result(S + i * 100 * MS, ttft, [5.0]), *phases)
        for i, (ttft, phases) in enumerate(zip(NEW_TTFT, PHASES, strict=True))
    ]
    results += [
        _reused(ok_result(2 * S + i * 100 * MS, t, [5.0])) for i, t in enumerate(REUSED_TTFT)
    ]
    refused = failed_result(4 * S, ErrorClass.CONNECT)
    refused.phases.connection_new = True
    refused.phases.connect_start = refused.sent  # no end: the connect failed
    results.append(refused)
    for i, result in enumerate(results[:-1]):
        result.response_id = f"chatcmpl-{i}"
        if i % 2 == 0:
            result.server_request_id = f"req-{i}"
    return results


EXACT = ExactLimits()


def _rows(tmp_path: Path, limits: ExactLimits = EXACT) -> dict[str, dict[str, Any]]:
    con = connect(tmp_path / "t.duckdb")
    store_run(
        con,
        "run",
        scenario(PROVIDERS),
        {
            ("tls", 0, "local"): _tls_results(),
            # Another transport: nothing known about connections, no ids.
            ("other", 0, "local"): [ok_result(S + i * 100 * MS, 50.0, [5.0]) for i in range(5)],
        },
    )
    report = build_report(con, "run", exact_limits=limits)
    con.close()
    return {row["provider"]: row["connections"] for row in report.stages}


def q(values: list[float], p: float) -> float:
    return float(np.quantile(values, p))


@pytest.mark.parametrize(
    "limits", [ExactLimits(), ExactLimits(ok_requests=0, itl_gaps=0)], ids=["exact", "stored"]
)
def test_new_and_reused_connections_and_their_figures(tmp_path: Path, limits: ExactLimits) -> None:
    c = _rows(tmp_path, limits)["tls"]
    assert set(c) == set(CONNECTION_FIELDS)
    assert (c["records_total"], c["connections_new"], c["connections_reused"]) == (17, 5, 12)
    dns, connect_ms, tls = (list(x) for x in zip(*PHASES, strict=True))
    # The failed connect has no connect time: the percentiles are over the four that do.
    for field, values in (("dns", dns), ("connect", connect_ms), ("tls", tls)):
        assert c[f"{field}_p50_ms"] == pytest.approx(q(values, 0.5)), field
        assert c[f"{field}_p99_ms"] == pytest.approx(q(values, 0.99)), field
    assert c["ttft_new_p50_ms"] == pytest.approx(q(NEW_TTFT, 0.5))
    assert c["ttft_new_p99_ms"] == pytest.approx(q(NEW_TTFT, 0.99))
    assert c["ttft_reused_p50_ms"] == pytest.approx(q(REUSED_TTFT, 0.5))
    assert c["ttft_reused_p99_ms"] == pytest.approx(q(REUSED_TTFT, 0.99))
    assert c["response_id_pct"] == pytest.approx(100 * 16 / 17)
    assert c["request_id_pct"] == pytest.approx(100 * 8 / 17)


def test_a_stage_whose_transport_said_nothing_is_unknown_not_zero(tmp_path: Path) -> None:
    c = _rows(tmp_path)["other"]
    assert (c["records_total"], c["connections_new"], c["connections_reused"]) == (5, 0, 0)
    for field in CONNECTION_FIELDS[3:13]:
        assert c[field] is None, field
    assert (c["response_id_pct"], c["request_id_pct"]) == (0, 0)
