"""Headline figures per provider for the top of the HTML report, from the report's own rows.

Each card holds what a reader looks for first: the best TTFT p50 and p99 and the best
aggregate output tok/s of any stage × region (with where it was measured), the lowest
$/1M output tokens, the error rate over all the provider's requests, and SLO attainment
over all of them when the run has an SLO. Nothing is estimated: every value is one of the
summary rows' figures, or a sum of their counts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from html import escape
from typing import Any

from analytics.render.chart_style import Palette
from analytics.report.build import RunReport
from analytics.report.formatting import LOW_SAMPLE_NOTE, money, number
from scenarios.stages import stage_label


@dataclass(frozen=True, slots=True)
class Kpi:
    """One headline figure: its label, value as text and where it comes from."""

    label: str
    value: str
    detail: str
    low_sample: bool = False  # the value is a percentile its sample cannot support


def _where(row: dict[str, Any], regions: int) -> str:
    stage = stage_label(int(row.get("concurrency") or 0), index=row["stage"], compact=True)
    return f"{stage} · {row['region']}" if regions > 1 else stage


def _pick(
    rows: list[dict[str, Any]], column: str, choose: Callable[..., dict[str, Any]]
) -> dict[str, Any] | None:
    known = [r for r in rows if r.get(column) is not None]
    return choose(known, key=lambda r: r[column]) if known else None


def provider_kpis(report: RunReport, provider: str) -> list[Kpi]:
    """The headline figures of one provider."""
    rows = [r for r in report.stages if r["provider"] == provider]
    regions = len({r["region"] for r in report.stages})
    out = []
    for column, label, digits in (
        ("ttft_p50_ms", "TTFT p50, best stage", 1),
        ("ttft_p99_ms", "TTFT p99, best stage", 1),
    ):
        best = _pick(rows, column, min)
        flagged = bool(best and column in best.get("low_sample", ()))
        out.append(
            Kpi(
                label,
                f"{number(best[column], digits)}{'*' if flagged else ''} ms" if best else "–",
                _where(best, regions) if best else "no successful request",
                flagged,
            )
        )
    fastest = _pick(rows, "output_tok_s", max)
    out.append(
        Kpi(
            "output tok/s, best stage",
            number(fastest["output_tok_s"], 0) if fastest else "–",
            _where(fastest, regions) if fastest else "no tokens",
        )
    )
    cheapest = _pick(rows, "cost_per_mtok_output", min)
    out.append(
        Kpi(
            "$ per 1M output tokens, lowest",
            money(cheapest["cost_per_mtok_output"]) if cheapest else "–",
            _where(cheapest, regions) if cheapest else "no pricing or deployment price",
        )
    )
    requests = sum(int(r["requests"] or 0) for r in rows)
    errors = sum(int(r["errors"] or 0) for r in rows)
    out.append(
        Kpi(
            "error rate, all stages",
            f"{errors / requests:.1%}" if requests else "–",
            f"{errors:,} of {requests:,} requests failed",
        )
    )
    objectives = {k: v for k, v in report.slo.items() if v is not None}
    measured = [r for r in rows if r.get("slo_attainment_pct") is not None]
    if objectives and measured:
        total = sum(int(r["requests"] or 0) for r in measured)
        met = sum(float(r["slo_attainment_pct"]) / 100 * int(r["requests"] or 0) for r in measured)
        out.append(
            Kpi(
                "SLO met, all stages",
                f"{met / total:.1%}" if total else "–",
                ", ".join(f"{k.removesuffix('_ms')} ≤ {v:g} ms" for k, v in objectives.items()),
            )
        )
    return out


CARD_STYLE = """
.kpis{display:grid;grid-template-columns:repeat(auto-fill,minmax(300px,1fr));gap:12px;margin:12px 0}
.kpi{border:1px solid #ddd;border-top:6px solid var(--hue);border-radius:6px;padding:8px 12px}
.kpi h3{margin:0 0 6px;font-size:15px}
.kpi dl{display:grid;grid-template-columns:1fr 1fr;gap:6px 12px;margin:0}
.kpi dt{font-size:11px;color:#666}.kpi dd{margin:0;font-size:20px;font-variant-numeric:tabular-nums}
.kpi dd small{display:block;font-size:11px;color:#666}
"""


def kpi_cards(report: RunReport, colours: Palette) -> str:
    """One card per provider, bordered in the provider's chart colour."""
    cards, flagged = [], False
    for provider in colours.providers:
        kpis = provider_kpis(report, provider)
        flagged = flagged or any(k.low_sample for k in kpis)
        items = "".join(
            f"<div><dt>{escape(k.label)}</dt><dd>{escape(k.value)}"
            f"<small>{escape(k.detail)}</small></dd></div>"
            for k in kpis
        )
        cards.append(
            f'<section class="kpi" style="--hue:{colours.hue(provider)}">'
            f"<h3>{escape(provider)}</h3><dl>{items}</dl></section>"
        )
    note = f'<p class="note">{escape(LOW_SAMPLE_NOTE)}</p>' if flagged else ""
    return f'<div class="kpis">{"".join(cards)}</div>{note}'
