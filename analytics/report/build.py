"""The run report, computed in DuckDB SQL from the raw request records.

``build_report`` returns everything every output format shows (the CLI's table,
markdown, HTML and JSON, and the REST API): per stage × provider × region summary rows
with percentiles, bootstrap intervals, low-sample flags, throughput, goodput and cost;
each row's most frequent error messages; the Pareto view; chart data; multi-turn
sessions by turn and how they ended (empty without sessions); failover through a
gateway, from the logs of the run's simulated upstreams (empty without upstreams); and,
when asked, a pairwise comparison. Field meanings:
docs/analytics.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import duckdb

from analytics.datasets.fingerprint import run_dataset
from analytics.report.answers import build_answers, with_stage_marks
from analytics.report.client_health import stage_health, with_client_health
from analytics.report.columns import describe
from analytics.report.connections import with_connections
from analytics.report.failover import run_failover
from analytics.report.images import with_images
from analytics.report.imported import definition_notes, printed_rows, run_import
from analytics.report.overlaps import shared_overlaps
from analytics.report.plots import errors_over_time, plot_data
from analytics.report.prefix_cache import with_prefix_cache, with_server_hit_rate
from analytics.report.prompt_realism import with_prompt_realism
from analytics.report.roofline_view import with_roofline
from analytics.report.server_timings import server_timings
from analytics.report.sessions import session_ends, session_turns
from analytics.report.spend import run_spend
from analytics.report.stored import (
    EXACT,
    HISTOGRAM,
    ExactLimits,
    group_histograms,
    histogram_plots,
    stored_summary_rows,
    use_histograms,
)
from analytics.report.token_truth import with_token_truth
from analytics.report.tool_calls import with_tool_calls
from analytics.report.top_errors import top_errors
from analytics.sql.files import load_sql
from analytics.sql.results import first_row
from analytics.stats.compare import compare_providers, compare_runs, pareto
from analytics.stats.confidence import CI_METRICS, ReplicateKey, bootstrap_rows, flag_low_samples
from analytics.stats.percentiles import CI_QUANTILES
from analytics.telemetry.metrics import server_metrics, telemetry_timeline
from scenarios.errors import NotFound


@dataclass(frozen=True)
class RunReport:
    """A run's identity, its summary rows and everything derived from them."""

    run_id: str
    name: str
    state: str
    shards: list[dict[str, Any]]
    stages: list[dict[str, Any]]
    providers: list[dict[str, Any]] = field(default_factory=list)
    slo: dict[str, Any] = field(default_factory=dict)
    pareto: list[dict[str, Any]] = field(default_factory=list)
    plots: dict[str, Any] = field(default_factory=dict)
    comparison: dict[str, Any] | None = None
    # Each row's most frequent failures, redacted (analytics/report/top_errors.py).
    errors: list[dict[str, Any]] = field(default_factory=list)
    # How the percentiles were computed: exact, or from stored histograms within a bound.
    percentiles: dict[str, Any] = field(default_factory=lambda: dict(EXACT))
    # Multi-turn sessions (analytics/report/sessions.py): by turn index, and how they ended.
    session_turns: list[dict[str, Any]] = field(default_factory=list)
    sessions: list[dict[str, Any]] = field(default_factory=list)
    # The dataset the run read and how (analytics/datasets/fingerprint.py), if any.
    dataset: dict[str, Any] | None = None
    # Server telemetry scraped from providers' metrics_url (analytics/telemetry/metrics.py).
    server_metrics: dict[str, Any] = field(
        default_factory=lambda: {"summary": [], "scrapes": [], "stages": []}
    )
    # Failover (analytics/report/failover.py): per stage, per upstream, and the upstreams' logs.
    failover: list[dict[str, Any]] = field(default_factory=list)
    upstreams: list[dict[str, Any]] = field(default_factory=list)
    upstream_logs: list[dict[str, Any]] = field(default_factory=list)
    # What a sweep or capacity search found, and the stages ended early
    # (analytics/report/answers.py).
    answers: dict[str, Any] = field(default_factory=dict)
    # What the run spent on token-priced providers, beside its dry-run bound
    # (analytics/report/spend.py); None without a priced provider.
    spend: dict[str, Any] | None = None
    # Other runs that measured an endpoint this run measured ``shared: true``, while it
    # ran (analytics/report/overlaps.py).
    shared_overlaps: list[dict[str, Any]] = field(default_factory=list)
    # TTFT decomposition per stage and provider: server queue, server prefill, network +
    # client (analytics/report/server_timings.py); empty for a run with no records.
    server_timings: list[dict[str, Any]] = field(default_factory=list)
    # Another tool's run, imported (analytics/report/imported.py): provenance, the tool's
    # definition notes and its own figures; None for a run tokenbench measured.
    imported: dict[str, Any] | None = None
    # Bootstrap replicates behind the intervals, kept for comparisons; not serialised.
    replicates: dict[ReplicateKey, list[float]] = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (every value a str, number, bool, None, list or dict)."""
        return {
            "run_id": self.run_id,
            "name": self.name,
            "state": self.state,
            # The answers head the report: capacity per provider and region, the sweep's
            # knee, the stages ended early (docs/answers.md).
            "answers": self.answers,
            "slo": self.slo,
            "providers": self.providers,
            "shards": self.shards,
            "stages": self.stages,
            # The summary table's columns (header, unit, the fields of ``stages`` each
            # shows), as the text formats print them: analytics/report/columns.py.
            "columns": describe("summary"),
            "errors": self.errors,
            "percentiles": self.percentiles,
            "session_turns": self.session_turns,
            "sessions": self.sessions,
            "failover": self.failover,
            "upstreams": self.upstreams,
            "upstream_logs": self.upstream_logs,
            "pareto": self.pareto,
            "comparison": self.comparison,
            "server_metrics": self.server_metrics,
            "plots": self.plots,
            "dataset": self.dataset,
            "spend": self.spend,
            "shared_overlaps": self.shared_overlaps,
            "server_timings": self.server_timings,
            "imported": self.imported,
        }

    def with_provider_comparison(self, provider_a: str, provider_b: str) -> RunReport:
        """This report plus B-versus-A ratios of two of its providers."""
        known = {p["provider"] for p in self.providers} | {r["provider"] for r in self.stages}
        for name in (provider_a, provider_b):
            if name not in known:
                raise UnknownProviderError(name, sorted(known))
        rows = compare_providers(self.stages, self.replicates, provider_a, provider_b)
        return replace(
            self, comparison={"kind": "providers", "a": provider_a, "b": provider_b, "rows": rows}
        )

    def with_run_comparison(self, baseline: RunReport) -> RunReport:
        """This report plus this run's ratios to ``baseline`` (e.g. yesterday's run)."""
        rows = compare_runs(
            baseline.run_id,
            _comparable(baseline),
            baseline.replicates,
            self.run_id,
            _comparable(self),
            self.replicates,
        )
        printed = [
            f"{_tool_of(r)}: figures as the tool printed them (no rows: no interval)"
            for r in (baseline, self)
            if not r.stages and r.imported is not None
        ]
        # A difference of method is not a difference of the endpoint: each row names the
        # definitions that differ between the two runs (docs/import.md).
        for row in rows:
            notes = definition_notes(row["metric"], baseline.imported, self.imported)
            row["definitions"] = [*notes, *printed]
            if notes:
                row["verdict"] += "; the runs define it differently (see definitions)"
        comparison = {
            "kind": "runs",
            "a": baseline.run_id,
            "b": self.run_id,
            "tools": [_tool_of(baseline), _tool_of(self)],
            "rows": rows,
        }
        return replace(self, comparison=comparison)


def _comparable(report: RunReport) -> list[dict[str, Any]]:
    """The rows a comparison reads: the run's summary rows, or for a summary-only
    import the figures its tool printed (docs/import.md)."""
    if report.stages or report.imported is None:
        return report.stages
    return printed_rows(report.imported)


def _tool_of(report: RunReport) -> str:
    """Which tool measured the run: tokenbench, or the imported run's tool and version."""
    if report.imported is None:
        return "tokenbench"
    version = report.imported["tool_version"]
    return f"{report.imported['tool']} {version}" if version else str(report.imported["tool"])


class UnknownRunError(NotFound, LookupError):
    """No run with that id in the database; the one argument is the id."""

    def public_detail(self) -> object:
        """``no run 'ID'``: the message alone is the bare id."""
        return f"no run {self.args[0]!r}"


class UnknownProviderError(NotFound, LookupError):
    """A provider name that the run does not have."""

    def __init__(self, name: str, known: list[str]) -> None:
        self.name = name
        self.known = known
        super().__init__(f"no provider {name!r} in this run; it has: {', '.join(known)}")


def _rows(cursor: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    columns = [d[0] for d in cursor.description or []]
    return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]


def _with_ci_columns(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for row in rows:
        row.pop("run_id", None)
        for metric in CI_METRICS:
            for label, _ in CI_QUANTILES:
                row[f"{metric}_{label}_ci_low_ms"] = None
                row[f"{metric}_{label}_ci_high_ms"] = None
        row["low_sample"] = flag_low_samples(row)
    return rows


def summary_rows(con: duckdb.DuckDBPyConnection, run_id: str) -> list[dict[str, Any]]:
    """The exact ``stage_summary`` rows of a run (from the raw records), each with CI
    columns (None until computed) and its ``low_sample`` list."""
    return _with_ci_columns(_rows(con.execute(load_sql("stage_summary"), {"run_id": run_id})))


def build_report(
    con: duckdb.DuckDBPyConnection,
    run_id: str,
    *,
    plots: bool = True,
    exact_limits: ExactLimits | None = None,
) -> RunReport:
    """Report of ``run_id`` (raises UnknownRunError if there is none).

    Runs within ``exact_limits`` get exact percentiles from the raw records; larger ones
    are reported from the shards' stored aggregates (analytics/report/stored.py), which the
    report's ``percentiles`` entry discloses."""
    run = first_row(con.execute("SELECT name, state FROM runs WHERE run_id = ?", [run_id]))
    if run is None:
        raise UnknownRunError(run_id)
    stored = use_histograms(con, run_id, exact_limits or ExactLimits())
    if stored:
        histograms = group_histograms(con, run_id)
        stages = _with_ci_columns(stored_summary_rows(con, run_id, histograms))
        replicates = bootstrap_rows(con, run_id, stages, histograms)
        method = dict(HISTOGRAM)
        charts = (
            {**histogram_plots(histograms), "errors_over_time": errors_over_time(con, run_id)}
            if plots
            else {}
        )
    else:
        stages = summary_rows(con, run_id)
        replicates = bootstrap_rows(con, run_id, stages)
        method = dict(EXACT)
        charts = plot_data(con, run_id) if plots else {}
    shards = _rows(
        con.execute(
            "SELECT shard_id, stage, provider, region, state, accepted_attempt, records, message, "
            "(SELECT count(*) FROM shard_attempts a WHERE a.run_id = s.run_id "
            " AND a.shard_id = s.shard_id) AS attempts "
            "FROM shards s WHERE run_id = ? ORDER BY stage, provider, region",
            [run_id],
        )
    )
    providers = _rows(
        con.execute(
            "SELECT * EXCLUDE (run_id) FROM providers WHERE run_id = ? ORDER BY provider",
            [run_id],
        )
    )
    slo_rows = _rows(con.execute("SELECT * EXCLUDE (run_id) FROM slos WHERE run_id = ?", [run_id]))
    stages = with_roofline(with_client_health(stages, stage_health(con, run_id)), providers)
    stages = with_tool_calls(con, run_id, with_prompt_realism(con, run_id, stages))
    stages = with_token_truth(con, run_id, stages)
    stages = with_connections(con, run_id, stages)
    stages = with_prefix_cache(con, run_id, stages)
    telemetry = server_metrics(con, run_id)
    stages = with_server_hit_rate(stages, telemetry["stages"])
    if plots and telemetry["scrapes"]:
        charts = {**charts, "server_timeline": telemetry_timeline(con, run_id)}
    stages = with_images(con, run_id, stages)
    failover, upstreams, upstream_logs = run_failover(con, run_id)
    stages = with_stage_marks(con, run_id, stages)
    return RunReport(
        run_id,
        str(run[0]),
        str(run[1]),
        shards,
        stages,
        providers=providers,
        slo=slo_rows[0] if slo_rows else {},
        pareto=pareto(stages),
        plots=charts,
        errors=top_errors(con, run_id, stored),
        percentiles=method,
        session_turns=session_turns(con, run_id),
        sessions=session_ends(con, run_id),
        dataset=run_dataset(con, run_id),
        server_metrics=telemetry,
        failover=failover,
        upstreams=upstreams,
        upstream_logs=upstream_logs,
        answers=build_answers(con, run_id, stages),
        spend=run_spend(con, run_id),
        shared_overlaps=shared_overlaps(con, run_id),
        server_timings=server_timings(con, run_id),
        imported=run_import(con, run_id, stages),
        replicates=replicates,
    )


def latest_run_id(con: duckdb.DuckDBPyConnection) -> str | None:
    """Id of the most recently created run, if any."""
    row = first_row(con.execute("SELECT run_id FROM runs ORDER BY created_at DESC LIMIT 1"))
    return None if row is None else str(row[0])
