"""``tokenbench plan``: what a self-hosted deployment could do, before anyone rents it.

Resolves catalog ids, runs the roofline model (``scenarios.roofline``) and prints the
memory breakdown, a fits/OOM matrix over the hardware catalog, and decode speed and
cost per batch size, as rich tables or as one JSON document. Registered in
``api.cli.app.COMMANDS``. Bad input (unknown ids, impossible options) exits with code 2.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from api.cli.errors import exit_for
from scenarios.catalog import Catalog, CatalogError, UnknownIdError, load_catalog
from scenarios.errors import BadInput
from scenarios.roofline import (
    GIB,
    Assumptions,
    BatchPoint,
    Deployment,
    MemoryFit,
    Prefill,
    batch_table,
    memory_fit,
    prefill,
    sweep_batches,
)

GPU_COUNTS = (1, 2, 4, 8)


class PlanFormat(StrEnum):
    """How the plan is printed."""

    table = "table"
    json = "json"


@dataclass(frozen=True)
class CompatibilityCell:
    """Whether the planned model fits ``gpus`` devices of one hardware entry."""

    hardware: str
    gpus: int
    status: str
    """``fits``, ``oom``, or ``unsupported`` (more devices than one group can span)."""
    max_sequences: int


@dataclass(frozen=True)
class Plan:
    """Everything ``tokenbench plan`` prints."""

    deployment: Deployment
    context_tokens: int
    assumptions: Assumptions
    gpu_hour_usd: float | None
    price_source: str | None
    fit: MemoryFit
    prefill: Prefill
    points: list[BatchPoint]
    compatibility: list[CompatibilityCell]


class PlanInputError(BadInput, ValueError):
    """Options that name nothing in the catalog or describe an impossible deployment."""


def build_plan(
    catalog: Catalog,
    *,
    model: str,
    quant: str,
    hardware: str,
    gpus: int,
    context: int,
    kv_dtype: str,
    batches: list[int] | None = None,
    gpu_hour_usd: float | None = None,
    assumptions: Assumptions | None = None,
) -> Plan:
    """Resolve the ids and compute the plan; PlanInputError says what is wrong."""
    knobs = assumptions or Assumptions()
    try:
        deployment = Deployment(
            model=catalog.get_model(model),
            quant=catalog.get_quantization(quant),
            kv_dtype=catalog.get_kv_dtype(kv_dtype),
            hardware=catalog.get_hardware(hardware),
            gpus=gpus,
        )
    except (UnknownIdError, ValueError) as exc:
        raise PlanInputError(str(exc)) from None
    if gpus > deployment.hardware.max_devices:
        raise PlanInputError(
            f"{deployment.hardware.id} spans at most {deployment.hardware.max_devices} "
            f"device(s) in one tensor-parallel group, not {gpus}"
        )
    if not 1 <= context <= deployment.model.context_tokens:
        raise PlanInputError(
            f"context must be 1..{deployment.model.context_tokens} tokens for "
            f"{deployment.model.id}, not {context}"
        )
    price: float | None = gpu_hour_usd
    source: str | None = "--gpu-hour-usd"
    if price is None:
        price, source = deployment.hardware.gpu_hour_usd, _catalog_price(deployment)
    fit = memory_fit(deployment, context, knobs)
    # Every sequence is assumed to hold the full context: the table is the worst case
    # for KV reads, and the same assumption caps the batch at max_sequences.
    points = batch_table(
        deployment, context, sweep_batches(fit.max_sequences, batches), price, knobs
    )
    return Plan(
        deployment=deployment,
        context_tokens=context,
        assumptions=knobs,
        gpu_hour_usd=price,
        price_source=source,
        fit=fit,
        prefill=prefill(deployment, context, knobs),
        points=points,
        compatibility=_compatibility(catalog, deployment, context, knobs),
    )


def _catalog_price(deployment: Deployment) -> str | None:
    hardware = deployment.hardware
    if hardware.gpu_hour_usd is None:
        return None
    return f"catalog: {hardware.price_source} ({hardware.price_date})"


def _compatibility(
    catalog: Catalog, planned: Deployment, context: int, knobs: Assumptions
) -> list[CompatibilityCell]:
    cells = []
    for hardware in catalog.hardware.values():
        for gpus in GPU_COUNTS:
            if gpus > hardware.max_devices:
                cells.append(CompatibilityCell(hardware.id, gpus, "unsupported", 0))
                continue
            deployment = Deployment(planned.model, planned.quant, planned.kv_dtype, hardware, gpus)
            fit = memory_fit(deployment, context, knobs)
            status = "fits" if fit.fits else "oom"
            cells.append(CompatibilityCell(hardware.id, gpus, status, fit.max_sequences))
    return cells


# ------------------------------------------------------------------------- output


def plan_document(plan: Plan) -> dict[str, Any]:
    """The plan as a JSON-ready mapping (``--format json``)."""
    dep = plan.deployment
    return {
        "deployment": {
            "model": dep.model.id,
            "quant": dep.quant.id,
            "kv_dtype": dep.kv_dtype.id,
            "hardware": dep.hardware.id,
            "gpus": dep.gpus,
            "context_tokens": plan.context_tokens,
        },
        "assumptions": asdict(plan.assumptions),
        "gpu_hour_usd": plan.gpu_hour_usd,
        "price_source": plan.price_source,
        "memory": {**asdict(plan.fit), "fits": plan.fit.fits},
        "prefill": asdict(plan.prefill),
        "decode": [
            {
                **asdict(point.step),
                "usd_per_million_output_tokens": point.usd_per_million_output_tokens,
            }
            for point in plan.points
        ],
        "compatibility": [asdict(cell) for cell in plan.compatibility],
    }


def render_plan(console: Console, plan: Plan) -> None:
    """Print the plan as rich tables."""
    dep, fit, knobs = plan.deployment, plan.fit, plan.assumptions
    console.print(
        f"[bold]{dep.model.name}[/bold] · {dep.quant.name} weights · {dep.kv_dtype.name} KV · "
        f"{dep.gpus} × {dep.hardware.name} · context {plan.context_tokens:,} tokens"
    )
    console.print(
        f"roofline with efficiency {knobs.efficiency:g}, step overhead "
        f"{knobs.step_overhead_s * 1e3:g} ms, memory utilisation {knobs.memory_utilisation:g}, "
        f"runtime overhead {knobs.runtime_overhead_bytes_per_gpu / GIB:g} GiB/GPU, "
        f"prefill MFU {knobs.mfu:g}",
        style="dim",
    )
    console.print(_memory_table(plan))
    if fit.fits:
        pre = plan.prefill
        console.print(
            f"Prefill {pre.prompt_tokens:,}-token prompt: {pre.prefill_s:.2f} s "
            f"({pre.prefill_tok_s:,.0f} tok/s); TTFT on an idle server ≈ {pre.ttft_s:.2f} s"
        )
        console.print(_batch_table(plan))
        if plan.gpu_hour_usd is None:
            console.print("no $/GPU-hour for this hardware: pass --gpu-hour-usd", style="dim")
        else:
            console.print(f"${plan.gpu_hour_usd:g}/GPU-hour from {plan.price_source}", style="dim")
    else:
        console.print(
            f"[red]does not fit[/red]: {dep.gpus} × {dep.hardware.name} cannot hold the weights, "
            f"runtime overhead and one {plan.context_tokens:,}-token sequence"
        )
    console.print(
        f"[bold]Across the catalog[/bold]: max sequences at {plan.context_tokens:,} tokens "
        "(OOM: does not fit; —: more devices than one node holds)"
    )
    console.print(_compatibility_table(plan))


def _gb(value: float) -> str:
    return f"{value / 1e9:,.1f} GB"


def _memory_table(plan: Plan) -> Table:
    dep, fit = plan.deployment, plan.fit
    table = Table(title="Memory", title_justify="left", show_header=False, box=None)
    table.add_column(style="bold")
    table.add_column(justify="right")
    table.add_column(style="dim")
    per_device = f"{dep.gpus} × {dep.hardware.memory_gib:g} GiB"
    table.add_row("device memory", _gb(fit.total_memory_bytes), per_device)
    table.add_row(
        "usable", _gb(fit.usable_memory_bytes), f"× {plan.assumptions.memory_utilisation:g}"
    )
    table.add_row("weights", _gb(fit.weight_bytes), f"{dep.quant.bits_per_weight:g} bits/weight")
    table.add_row("runtime overhead", _gb(fit.runtime_overhead_bytes), "per-GPU allowance")
    table.add_row("KV cache budget", _gb(fit.kv_budget_bytes), "usable − weights − overhead")
    table.add_row("KV per token", f"{fit.kv_bytes_per_token:,.0f} B", dep.kv_dtype.name)
    table.add_row(
        "KV per sequence", _gb(fit.kv_bytes_per_sequence), f"at {plan.context_tokens:,} tokens"
    )
    table.add_row(
        "max sequences", f"{fit.max_sequences:,}", f"{fit.max_kv_tokens:,} KV tokens in all"
    )
    return table


def _batch_table(plan: Plan) -> Table:
    table = Table(
        title=f"Decode vs batch (each sequence at {plan.context_tokens:,} tokens)",
        title_justify="left",
    )
    for header in ("batch", "step ms", "bound", "tok/s/stream", "tok/s total", "$/1M out"):
        table.add_column(header, justify="left" if header == "bound" else "right")
    for point in plan.points:
        step, cost = point.step, point.usd_per_million_output_tokens
        table.add_row(
            str(step.batch),
            f"{step.step_s * 1e3:.1f}",
            step.bound,
            f"{step.per_stream_tok_s:,.1f}",
            f"{step.aggregate_tok_s:,.0f}",
            "—" if cost is None else f"{cost:,.2f}",
        )
    return table


def _compatibility_table(plan: Plan) -> Table:
    # The legend is printed above the table (render_plan): as a title or caption it would
    # wrap at this narrow table's width.
    table = Table()
    table.add_column("hardware")
    for gpus in GPU_COUNTS:
        table.add_column(f"{gpus} GPU" + ("s" if gpus > 1 else ""), justify="right")
    rows: dict[str, list[str]] = {}
    for cell in plan.compatibility:
        text = {"fits": f"[green]{cell.max_sequences:,}", "oom": "[red]OOM", "unsupported": "—"}
        rows.setdefault(cell.hardware, []).append(text[cell.status])
    for hardware, cells in rows.items():
        table.add_row(hardware, *cells)
    return table


# ---------------------------------------------------------------------------- command


def plan_command(
    *,
    model: str,
    quant: str,
    hardware: str,
    gpus: int,
    context: int,
    kv_dtype: str,
    batches: list[int] | None,
    gpu_hour_usd: float | None,
    catalog_file: Path | None,
    output_format: str,
    assumptions: Assumptions | None = None,
) -> None:
    """Load the catalog, build the plan and print it; bad input raises typer.Exit(2)."""
    try:
        catalog = load_catalog(catalog_file)
        result = build_plan(
            catalog,
            model=model,
            quant=quant,
            hardware=hardware,
            gpus=gpus,
            context=context,
            kv_dtype=kv_dtype,
            batches=batches,
            gpu_hour_usd=gpu_hour_usd,
            assumptions=assumptions,
        )
    except CatalogError as exc:
        raise exit_for(exc, f"invalid catalog\n{exc}") from None
    except PlanInputError as exc:
        raise exit_for(exc) from None
    if output_format == PlanFormat.json:
        sys.stdout.write(json.dumps(plan_document(result), indent=2, ensure_ascii=False) + "\n")
    else:
        render_plan(Console(highlight=False), result)


def plan(
    *,
    model: Annotated[str, typer.Option(help="Model id from the catalog.")] = "llama-3.1-70b",
    quant: Annotated[str, typer.Option(help="Weight format id, e.g. fp16, fp8, q4_k_m.")] = "fp16",
    hardware: Annotated[str, typer.Option(help="Hardware id, e.g. h100, h200.")] = "h100",
    gpus: Annotated[int, typer.Option(min=1, help="Devices, tensor-parallel.")] = 1,
    context: Annotated[int, typer.Option(min=1, help="Tokens per sequence (prompt + output).")] = (
        8192
    ),
    kv_dtype: Annotated[str, typer.Option(help="KV-cache dtype id: fp16, bf16, fp8.")] = "fp16",
    batch: Annotated[
        list[int] | None, typer.Option(help="Batch size to tabulate (repeatable).")
    ] = None,
    gpu_hour_usd: Annotated[
        float | None, typer.Option(min=0, help="Price per GPU-hour; default from the catalog.")
    ] = None,
    efficiency: Annotated[
        float, typer.Option(min=0, max=1, help="Share of peak bandwidth/FLOP/s reached.")
    ] = 1.0,
    mfu: Annotated[float, typer.Option(min=0, max=1, help="Prefill FLOP/s utilisation.")] = 0.5,
    catalog: Annotated[
        Path | None, typer.Option(help="YAML file adding or overriding catalog entries.")
    ] = None,
    output: Annotated[PlanFormat, typer.Option("--format", help="Output format.")] = (
        PlanFormat.table
    ),
) -> None:
    """Capacity plan: memory fit, decode speed and cost per batch, fits/OOM matrix."""
    try:
        knobs = Assumptions(efficiency=efficiency, mfu=mfu)
    except ValueError as exc:
        raise exit_for(BadInput(str(exc))) from None
    plan_command(
        model=model,
        quant=quant,
        hardware=hardware,
        gpus=gpus,
        context=context,
        kv_dtype=kv_dtype,
        batches=batch,
        gpu_hour_usd=gpu_hour_usd,
        catalog_file=catalog,
        output_format=output.value,
        assumptions=knobs,
    )
