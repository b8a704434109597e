"""Printing a dry run's plan and the spend ledger: a table on the terminal, or JSON
(``tokenbench run|submit --dry-run``, ``tokenbench spend``; docs/teams.md)."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.table import Table


def _usd(value: Any) -> str:
    return "-" if value is None else f"${float(value):,.4f}"


def _int(value: Any) -> str:
    return "-" if value is None else f"{int(value):,}"


def print_dry_run(console: Console, answer: dict[str, Any], as_json: bool) -> None:
    """A dry run's answer (``DryRun.to_json``): per provider and region the shards,
    requests, tokens and cost bound, the totals, how each stage is bounded, the
    duration estimate and the team's budget."""
    if as_json:
        console.print_json(json.dumps(answer))
        return
    plan, budget = answer["plan"], answer["budget"]
    table = Table(title=f"dry run · {plan['scenario']}", title_justify="left")
    for name in ("provider", "region", "shards", "requests", "prompt tokens", "output tokens"):
        table.add_column(name, justify="left" if name in ("provider", "region") else "right")
    table.add_column("USD/1M in, out", justify="right")
    table.add_column("cost bound", justify="right")
    for row in plan["rows"]:
        prices = f"{row['input_per_mtok']:g}, {row['output_per_mtok']:g}" if row["priced"] else "-"
        bound = _usd(row["cost_bound_usd"]) if row["priced"] else "not priced"
        table.add_row(
            row["provider"],
            row["region"],
            _int(row["shards"]),
            _int(row["requests"]),
            _int(row["prompt_tokens"]),
            _int(row["output_tokens"]),
            prices,
            bound if row["cost_bound_usd"] is not None or not row["priced"] else "unbounded",
        )
    table.add_row(
        "total",
        "",
        _int(plan["shards"]),
        _int(plan["requests"]),
        _int(plan["prompt_tokens"]),
        _int(plan["output_tokens"]),
        "",
        _usd(plan["cost_bound_usd"]) if plan["unbounded"] == [] else "unbounded",
        style="bold",
    )
    console.print(table)
    for stage in plan["stages"]:
        count = "unbounded" if stage["requests"] is None else f"{stage['requests']:,}"
        console.print(
            f"stage {stage['index']}: {count} per provider and region ({stage['bounded_by']})",
            highlight=False,
        )
    duration = plan["duration_estimate_s"]
    console.print(
        "duration estimate: "
        + ("depends on the endpoint's speed" if duration is None else f"{duration:,.0f} s"),
        highlight=False,
    )
    for why in plan["unbounded"]:
        console.print(f"[yellow]no cost bound:[/yellow] {why}", highlight=False)
    if plan["max_cost_usd"] is not None:
        console.print(f"run cap (budget.max_cost_usd): {_usd(plan['max_cost_usd'])}")
    monthly = budget["monthly_budget_usd"]
    console.print(
        f"team {budget['team']}: monthly budget "
        + ("unlimited" if monthly is None else _usd(monthly))
        + f", spent this month {_usd(budget['spent_this_month_usd'])}, left "
        + ("unlimited" if budget["left_usd"] is None else _usd(budget["left_usd"])),
        highlight=False,
    )
    if answer["admitted"]:
        console.print("[green]admitted[/green]: a submission would start", highlight=False)
    else:
        console.print(f"[red]refused[/red]: {answer['refused']}", highlight=False)


def print_spend(console: Console, answer: dict[str, Any], as_json: bool) -> None:
    """The ledger (``GET /v1/spend``'s answer) as a table, or as JSON."""
    if as_json:
        console.print_json(json.dumps(answer))
        return
    group = answer["group"]
    table = Table(
        title=f"spend · team {answer['team']} · {answer['since']} to {answer['until']}",
        title_justify="left",
    )
    for name in (group, "runs", "input tokens", "output tokens", "USD"):
        table.add_column(name, justify="left" if name == group else "right")
    for row in answer["rows"]:
        table.add_row(
            str(row[group]),
            _int(row["runs"]),
            _int(row["input_tokens"]),
            _int(row["output_tokens"]),
            _usd(row["usd"]),
        )
    table.add_row("total", "", "", "", _usd(answer["total_usd"]), style="bold")
    console.print(table)
    budget = answer["budget"]
    monthly = budget["monthly_budget_usd"]
    console.print(
        f"monthly budget {'unlimited' if monthly is None else _usd(monthly)}, spent this "
        f"month {_usd(budget['spent_this_month_usd'])} ({budget['setting']})",
        highlight=False,
    )
