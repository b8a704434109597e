"""``tokenbench simulate``: serve the simulated endpoint, fixed-latency or batching.

The options mirror a scenario's ``simulate`` block (``scenarios.providers.simulate.SimulateSpec``)
one for one, so the command line and a scenario describe the same endpoint. Options left
out take the block's defaults; ``--model`` (a catalog id, as in vLLM) switches to the
continuous-batching model, and ``--served-model-name`` sets the id the endpoint reports.
``--fault`` (repeatable) is one entry of ``faults`` in a compact form:
``KIND[:key=value,...]``, the burst's keys (``every_s``, ``for_s``, ``offset_s``) among
the others, e.g. ``--fault http_429:every_s=10,for_s=2,retry_after_s=1``.
Register it with ``app.command()(simulate)``; bad options exit with code 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.console import Console

from api.cli.errors import exit_for
from scenarios.errors import BadInput
from scenarios.providers.faults import FAULT_KINDS
from scenarios.providers.simulate import SimulateSpec

_BURST_KEYS = ("every_s", "for_s", "offset_s")


def parse_fault(text: str) -> dict[str, Any]:
    """One ``--fault KIND[:key=value,...]`` as a ``faults`` entry (values stay strings:
    the spec's validation converts and bounds them, naming the field)."""
    kind, _, rest = text.partition(":")
    fault: dict[str, Any] = {"kind": kind.strip()}
    burst: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in rest.split(","))):
        key, equals, value = item.partition("=")
        if not equals or not key.strip():
            raise BadInput(f"--fault {text!r}: {item!r} is not key=value")
        key = key.strip()
        (burst if key in _BURST_KEYS else fault)[key] = value.strip()
    if burst:
        fault["burst"] = burst
    return fault


def build_spec(options: dict[str, Any]) -> SimulateSpec:
    """The spec of the options that were given (None means left out)."""
    return SimulateSpec.model_validate({k: v for k, v in options.items() if v is not None})


def describe(exc: ValidationError) -> list[str]:
    """One line per problem, naming the option (``--kv-dtype``) rather than the field."""
    lines = []
    for error in exc.errors(include_url=False):
        message = error["msg"].removeprefix("Value error, ")
        names = [str(part) for part in error["loc"]]
        if names[:1] == ["faults"] and len(names) >= 2:
            # faults.N.KIND.field: the Nth --fault (from 1), its field as written there
            rest = names[3:] if len(names) > 2 and names[2] in FAULT_KINDS else names[2:]
            where = f"--fault {int(names[1]) + 1}" + (f": {'.'.join(rest)}" if rest else "")
            lines.append(f"{where}: {message}")
            continue
        lines.append(f"--{'.'.join(names).replace('_', '-')}: {message}" if names else message)
    return lines


def simulate(
    port: Annotated[int, typer.Option(help="Port (0 picks a free one).")] = 8000,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    ttft_ms: Annotated[
        float | None, typer.Option(help="Fixed model: time to first token (default 100).")
    ] = None,
    itl_ms: Annotated[
        float | None, typer.Option(help="Fixed model: time per token (default 10).")
    ] = None,
    tokens_per_chunk: Annotated[
        int | None, typer.Option(help="Tokens per SSE event (default 1).")
    ] = None,
    error_rate: Annotated[
        float | None, typer.Option(help="Share of requests failed (default 0).")
    ] = None,
    error_status: Annotated[
        int | None, typer.Option(help="HTTP status of failures (default 500).")
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(help="Catalog model id, e.g. llama-3.1-405b: use the batching model."),
    ] = None,
    quant: Annotated[str | None, typer.Option(help="Weight format id (default fp16).")] = None,
    kv_dtype: Annotated[str | None, typer.Option(help="KV-cache dtype id (default fp16).")] = None,
    hardware: Annotated[str | None, typer.Option(help="Hardware id (default h100).")] = None,
    gpus: Annotated[int | None, typer.Option(help="Devices, tensor-parallel (default 1).")] = None,
    efficiency: Annotated[
        float | None, typer.Option(help="Share of peak bandwidth/FLOP/s per step (default 0.6).")
    ] = None,
    mfu: Annotated[
        float | None, typer.Option(help="Prefill FLOP/s utilisation (default 0.5).")
    ] = None,
    step_overhead_ms: Annotated[
        float | None, typer.Option(help="Fixed time added to every step (default 0).")
    ] = None,
    context: Annotated[
        int | None, typer.Option(help="Tokens reserved per sequence; sets capacity (default 8192).")
    ] = None,
    max_batch: Annotated[
        int | None, typer.Option(help="Most sequences running at once (default 256).")
    ] = None,
    chunked_prefill_tokens: Annotated[
        int | None, typer.Option(help="Chunked prefill: token budget per step (default off).")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Seed of the fault draws (default 0).")] = None,
    unfinished_rate: Annotated[
        float | None,
        typer.Option(help="Share of answers ending with [DONE] but no finish_reason (0)."),
    ] = None,
    stream_usage: Annotated[
        bool | None,
        typer.Option(
            "--stream-usage/--no-stream-usage",
            help="Stream the usage chunk a request asks for (default on; off: as "
            "llama-cpp-python's server).",
        ),
    ] = None,
    tool_call_rate: Annotated[
        float | None,
        typer.Option(help="Share of tool_choice auto requests answered with a tool call (0)."),
    ] = None,
    prompt_token_ratio: Annotated[
        float | None,
        typer.Option(help="Prompt tokens reported per word (default 1; 1.3 is English BPE)."),
    ] = None,
    prompt_tokenizer: Annotated[
        str | None,
        typer.Option(
            help="Count prompt tokens with this tokenizer: a local tokenizer.json or "
            "directory, else a Hugging Face hub name (from the cache)."
        ),
    ] = None,
    prefill_ms_per_token: Annotated[
        float | None,
        typer.Option(help="Fixed model: TTFT added per uncached prompt token (default 0)."),
    ] = None,
    prefix_cache: Annotated[
        bool | None,
        typer.Option(
            "--prefix-cache/--no-prefix-cache",
            help="Reuse conversations served: later turns prefill only what is new.",
        ),
    ] = None,
    prefix_cache_words: Annotated[
        int | None, typer.Option(help="Words the prefix cache holds (default 1000000).")
    ] = None,
    spec_decode_acceptance: Annotated[
        float | None,
        typer.Option(
            help="Serve vLLM's speculative-decoding counters at /metrics, each draft token "
            "accepted with this probability (0-1; default none)."
        ),
    ] = None,
    spec_decode_tokens: Annotated[
        int | None, typer.Option(help="Draft tokens per speculative-decoding step (3).")
    ] = None,
    gpu_power: Annotated[
        bool | None,
        typer.Option(
            "--gpu-power/--no-gpu-power",
            help="Serve a DCGM power gauge per GPU at /metrics, modelled from load.",
        ),
    ] = None,
    gpu_idle_watts: Annotated[
        float | None, typer.Option(help="A simulated GPU's idle draw in watts (100).")
    ] = None,
    gpu_max_watts: Annotated[
        float | None, typer.Option(help="A simulated GPU's draw with its batch full (700).")
    ] = None,
    image_token_rule: Annotated[
        str | None,
        typer.Option(help="Image tokens: tiles (OpenAI-style, default) or patches."),
    ] = None,
    image_patch_px: Annotated[
        int | None, typer.Option(help="Patches rule: pixels a side per image token (28).")
    ] = None,
    report_image_tokens: Annotated[
        bool | None,
        typer.Option(
            "--report-image-tokens/--no-report-image-tokens",
            help="Split image and text tokens in usage.prompt_tokens_details (default on).",
        ),
    ] = None,
    fault: Annotated[
        list[str] | None,
        typer.Option(
            help="A fault, repeatable: KIND[:key=value,...] with KIND http_429, http_5xx, "
            "reset, stall or cut, e.g. http_429:every_s=10,for_s=2 (docs/failover.md).",
        ),
    ] = None,
    request_log: Annotated[
        int | None,
        typer.Option(help="Chat requests kept in GET /tokenbench/requests (100000)."),
    ] = None,
    served_model_name: Annotated[
        str | None,
        typer.Option(help="Model id the endpoint reports (default --model, else 'simulated')."),
    ] = None,
) -> None:
    """Serve a simulated OpenAI-compatible streaming endpoint (fixed or batching latency)."""
    from workers.simulator.process import run as run_simulator  # noqa: PLC0415 - heavy

    errors = Console(stderr=True, highlight=False)
    try:
        faults = None if not fault else [parse_fault(text) for text in fault]
    except BadInput as exc:
        raise exit_for(exc) from None
    options = {
        "ttft_ms": ttft_ms,
        "itl_ms": itl_ms,
        "tokens_per_chunk": tokens_per_chunk,
        "error_rate": error_rate,
        "error_status": error_status,
        "model": model,
        "quant": quant,
        "kv_dtype": kv_dtype,
        "hardware": hardware,
        "gpus": gpus,
        "efficiency": efficiency,
        "mfu": mfu,
        "step_overhead_ms": step_overhead_ms,
        "context": context,
        "max_batch": max_batch,
        "chunked_prefill_tokens": chunked_prefill_tokens,
        "seed": seed,
        "unfinished_rate": unfinished_rate,
        "stream_usage": stream_usage,
        "tool_call_rate": tool_call_rate,
        "prompt_token_ratio": prompt_token_ratio,
        "prefill_ms_per_token": prefill_ms_per_token,
        "prefix_cache": prefix_cache,
        "prefix_cache_words": prefix_cache_words,
        "spec_decode_acceptance": spec_decode_acceptance,
        "spec_decode_tokens": spec_decode_tokens,
        "gpu_power": gpu_power,
        "gpu_idle_watts": gpu_idle_watts,
        "gpu_max_watts": gpu_max_watts,
        "image_token_rule": image_token_rule,
        "image_patch_px": image_patch_px,
        "report_image_tokens": report_image_tokens,
        "faults": faults,
        "request_log": request_log,
        "prompt_tokenizer": None
        if prompt_tokenizer is None
        else ({"path": prompt_tokenizer} if Path(prompt_tokenizer).exists() else prompt_tokenizer),
    }
    try:
        spec = build_spec(options)
    except ValidationError as exc:
        raise exit_for(BadInput("\n".join(describe(exc)))) from None
    name = served_model_name or spec.model or "simulated"
    kind = "fixed latency" if spec.model is None else f"batching {spec.model}"
    errors.print(f"simulated endpoint ({kind}) on http://{host}:{port}/v1 (Ctrl-C stops)")
    try:
        run_simulator(spec, name, host, port, parent_pid=None)
    except BadInput as exc:  # e.g. a tokenizer that cannot be had
        raise exit_for(exc) from None
