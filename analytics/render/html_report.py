"""The report as one self-contained HTML file: KPI cards, tables, verdicts and charts.

No script, stylesheet, font or image is fetched: Plotly's JavaScript is inlined once in
the page, so the file opens offline and can be attached to a ticket as is. The charts
(analytics/render/charts.py) are interactive: hover for values, click a legend entry to hide it.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from analytics.render.charts import chart_divs, palette, plotly_js
from analytics.render.kpi import CARD_STYLE, kpi_cards
from analytics.report.build import RunReport
from analytics.sections.model import Section
from analytics.sections.registry import build_sections

_STYLE = """
body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1400px}
h1{font-size:20px}h2{font-size:16px;margin-top:28px}
table{border-collapse:collapse;font-size:11.5px;margin:8px 0}
th,td{border:1px solid #ddd;padding:2px 4px}
th{background:#f4f4f4;vertical-align:bottom}td{white-space:nowrap}
td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:normal}
.wide{overflow-x:auto}.note{color:#666;font-size:12px}
.chart{margin:8px 0 20px;border-top:1px solid #eee}
.answer{background:#f3f8ff;border-left:4px solid #2b6cb0;padding:6px 12px;margin:8px 0}
.answer li{margin:4px 0;font-size:14px}
.warn{color:#975a16}
"""


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[bool]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="n">{escape(c)}</td>' if n else f"<td>{escape(c)}</td>"
            for c, n in zip(row, numeric, strict=True)
        )
        + "</tr>"
        for row in rows
    )
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    return f'<div class="wide">{table}</div>'


def section_html(section: Section, anchor: str) -> str:
    """One section: its heading (the anchor as its id), lead, table (or lines) and note."""
    out = f'<h2 id="{anchor}">{escape(section.title)}</h2>' if section.title else ""
    if section.lead:
        out += f'<p class="answer">{escape(section.lead)}</p>'
    if section.is_table:
        shown = section.shown()
        header = [section.columns[i].name for i in shown]
        numeric = [section.columns[i].numeric for i in shown]
        out += _table(header, section.text_rows(shown), numeric)
    elif section.title:
        items = "".join(f"<li>{escape(line)}</li>" for line in section.lines)
        out += f'<ul class="answer">{items}</ul>'
    else:
        css = "warn" if section.warning else "note"
        out += "".join(f'<p class="{css}">{escape(line)}</p>' for line in section.lines)
    if section.note:
        note = "<br>".join(escape(line) for line in section.note.split("\n"))
        out += f'<p class="note">{note}</p>'
    return out


def _anchors(sections: list[Section]) -> list[str]:
    # A section's key is its id; a key that repeats (a sweep per provider) is numbered.
    seen: dict[str, int] = {}
    out = []
    for section in sections:
        seen[section.key] = seen.get(section.key, 0) + 1
        out.append(section.key if seen[section.key] == 1 else f"{section.key}-{seen[section.key]}")
    return out


def sections_html(report: RunReport) -> list[tuple[str, str]]:
    """Each section of the report as ``(key, escaped HTML)``, in order: what the HTML
    report shows, without its charts and page (the web console embeds them)."""
    sections = build_sections(report)
    return [
        (s.key, section_html(s, anchor))
        for s, anchor in zip(sections, _anchors(sections), strict=True)
    ]


def render_html(report: RunReport) -> str:
    """The whole report as one HTML document."""
    title = f"tokenbench run {report.run_id} · {report.name} · {report.state}"
    sections = build_sections(report)
    parts = [
        section_html(s, anchor) for s, anchor in zip(sections, _anchors(sections), strict=True)
    ]
    keys = [s.key for s in sections]
    # The answers head the page; the SLO and the KPI cards follow them.
    head = 1 if keys[:1] == ["capacity"] else 0
    # The charts go before the percentiles, which detail them.
    at = keys.index("percentiles") if "percentiles" in keys else len(keys)
    charts = "".join(
        f'<section class="chart" id="{anchor}" aria-label="{escape(heading)}">{div}</section>'
        for anchor, heading, div in chart_divs(report)
    )
    slo = ", ".join(f"{k} ≤ {v:g}" for k, v in report.slo.items() if v is not None) or "none"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{_STYLE}{CARD_STYLE}</style>"
        f'<script type="text/javascript">{plotly_js()}</script></head><body>'
        f"<h1>{escape(title)}</h1>"
        + "".join(parts[:head])
        + f'<p class="note">SLO: {escape(slo)}.</p>'
        + kpi_cards(report, palette(report))
        + "".join(parts[head:at])
        + '<h2 id="charts">Charts</h2><p class="note">Interactive: hover for values, drag to '
        + "zoom, double-click to reset, click a legend entry to hide it.</p>"
        + charts
        + "".join(parts[at:])
        + "</body></html>\n"
    )
