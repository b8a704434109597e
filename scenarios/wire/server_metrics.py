"""Server telemetry: the metric names scraped from a provider's ``metrics_url``, how each
maps to a canonical name, and the Arrow schema the samples travel in.

Workers keep only the series of the names below (every other line of the answer is
skipped before parsing), the control plane stores them as they were exposed in the
``server_metrics`` table, and the views ``server_metric_names`` (analytics/sql/views/
90_server_metric_names.sql, which a unit test keeps equal to :data:`NAME_MAP`) and
``server_metrics_canonical`` turn them into canonical figures. docs/telemetry.md shows
the same table for users.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final

import pyarrow as pa


class Canonical(StrEnum):
    """Engine-independent figures of a serving stack (docs/telemetry.md)."""

    RUNNING_REQUESTS = "running_requests"
    WAITING_REQUESTS = "waiting_requests"
    KV_CACHE_USAGE = "kv_cache_usage"  # share of the KV cache in use, 0..1
    PROMPT_TOKENS_TOTAL = "prompt_tokens_total"  # counter
    GENERATION_TOKENS_TOTAL = "generation_tokens_total"  # counter
    GPU_UTILIZATION = "gpu_utilization"  # 0..1
    GPU_MEMORY_USED_BYTES = "gpu_memory_used_bytes"
    # Prefix cache: prompt tokens looked up and found (counters), or a hit-rate share.
    PREFIX_CACHE_QUERIES_TOTAL = "prefix_cache_queries_total"
    PREFIX_CACHE_HITS_TOTAL = "prefix_cache_hits_total"
    PREFIX_CACHE_HIT_RATE = "prefix_cache_hit_rate"  # 0..1
    # Speculative decoding: drafts, draft tokens proposed and accepted (counters), or the
    # engine's own acceptance rate (0..1) and mean accepted length (bonus token included).
    SPEC_DRAFTS_TOTAL = "spec_drafts_total"
    SPEC_DRAFT_TOKENS_TOTAL = "spec_draft_tokens_total"
    SPEC_ACCEPTED_TOKENS_TOTAL = "spec_accepted_tokens_total"
    SPEC_ACCEPT_RATE = "spec_accept_rate"
    SPEC_ACCEPT_LENGTH = "spec_accept_length"
    # GPU power (watts, summed over GPUs) and energy (joules, a counter summed over GPUs).
    GPU_POWER_WATTS = "gpu_power_watts"
    GPU_ENERGY_JOULES_TOTAL = "gpu_energy_joules_total"


# Counters become rates per second between consecutive scrapes of one shard attempt.
RATES: Final = {
    Canonical.PROMPT_TOKENS_TOTAL: "prompt_tokens_per_s",
    Canonical.GENERATION_TOKENS_TOTAL: "generation_tokens_per_s",
}

# Every counter: the report's per-stage figures use their increases, never their mean.
COUNTERS: Final = frozenset(
    {
        Canonical.PROMPT_TOKENS_TOTAL,
        Canonical.GENERATION_TOKENS_TOTAL,
        Canonical.PREFIX_CACHE_QUERIES_TOTAL,
        Canonical.PREFIX_CACHE_HITS_TOTAL,
        Canonical.SPEC_DRAFTS_TOTAL,
        Canonical.SPEC_DRAFT_TOKENS_TOTAL,
        Canonical.SPEC_ACCEPTED_TOKENS_TOTAL,
        Canonical.GPU_ENERGY_JOULES_TOTAL,
    }
)


@dataclass(frozen=True, slots=True)
class MappedName:
    """One exposed sample name and the canonical figure it is.

    ``scale`` converts the exposed unit to the canonical one (DCGM's percent to 0..1, MiB
    to bytes); ``combine`` is how the series of one scrape (one per GPU, engine or model
    label) make one figure: ``sum`` for counts, ``avg`` for shares."""

    source: str
    name: str
    canonical: Canonical
    scale: float = 1.0
    combine: str = "sum"


_MIB = 1024.0 * 1024.0

NAME_MAP: Final[tuple[MappedName, ...]] = (
    MappedName("vllm", "vllm:num_requests_running", Canonical.RUNNING_REQUESTS),
    MappedName("vllm", "vllm:num_requests_waiting", Canonical.WAITING_REQUESTS),
    # vLLM renamed gpu_cache_usage_perc to kv_cache_usage_perc (V1 engine); versions in
    # between expose both with the same value, so shares average rather than add.
    MappedName("vllm", "vllm:kv_cache_usage_perc", Canonical.KV_CACHE_USAGE, combine="avg"),
    MappedName("vllm", "vllm:gpu_cache_usage_perc", Canonical.KV_CACHE_USAGE, combine="avg"),
    MappedName("vllm", "vllm:prompt_tokens_total", Canonical.PROMPT_TOKENS_TOTAL),
    MappedName("vllm", "vllm:generation_tokens_total", Canonical.GENERATION_TOKENS_TOTAL),
    # Prefix-cache counters in tokens (V1 engine). vLLM 0.9 renamed gpu_prefix_cache_* to
    # prefix_cache_*; versions in between expose both with equal values, which doubles
    # queries and hits alike and leaves their ratio, the only figure read, unchanged.
    MappedName("vllm", "vllm:prefix_cache_queries_total", Canonical.PREFIX_CACHE_QUERIES_TOTAL),
    MappedName("vllm", "vllm:prefix_cache_hits_total", Canonical.PREFIX_CACHE_HITS_TOTAL),
    MappedName("vllm", "vllm:gpu_prefix_cache_queries_total", Canonical.PREFIX_CACHE_QUERIES_TOTAL),
    MappedName("vllm", "vllm:gpu_prefix_cache_hits_total", Canonical.PREFIX_CACHE_HITS_TOTAL),
    # The V0 engine's block hit-rate gauge.
    MappedName(
        "vllm", "vllm:gpu_prefix_cache_hit_rate", Canonical.PREFIX_CACHE_HIT_RATE, combine="avg"
    ),
    MappedName("vllm", "vllm:spec_decode_num_drafts_total", Canonical.SPEC_DRAFTS_TOTAL),
    MappedName(
        "vllm", "vllm:spec_decode_num_draft_tokens_total", Canonical.SPEC_DRAFT_TOKENS_TOTAL
    ),
    MappedName(
        "vllm", "vllm:spec_decode_num_accepted_tokens_total", Canonical.SPEC_ACCEPTED_TOKENS_TOTAL
    ),
    MappedName("sglang", "sglang:num_running_reqs", Canonical.RUNNING_REQUESTS),
    MappedName("sglang", "sglang:num_queue_reqs", Canonical.WAITING_REQUESTS),
    MappedName("sglang", "sglang:token_usage", Canonical.KV_CACHE_USAGE, combine="avg"),
    MappedName("sglang", "sglang:prompt_tokens_total", Canonical.PROMPT_TOKENS_TOTAL),
    MappedName("sglang", "sglang:generation_tokens_total", Canonical.GENERATION_TOKENS_TOTAL),
    MappedName("sglang", "sglang:cache_hit_rate", Canonical.PREFIX_CACHE_HIT_RATE, combine="avg"),
    MappedName("sglang", "sglang:spec_accept_rate", Canonical.SPEC_ACCEPT_RATE, combine="avg"),
    MappedName("sglang", "sglang:spec_accept_length", Canonical.SPEC_ACCEPT_LENGTH, combine="avg"),
    MappedName("tgi", "tgi_batch_current_size", Canonical.RUNNING_REQUESTS),
    MappedName("tgi", "tgi_queue_size", Canonical.WAITING_REQUESTS),
    # TGI counts tokens only in histograms of finished requests: their sums are counters.
    MappedName("tgi", "tgi_request_input_length_sum", Canonical.PROMPT_TOKENS_TOTAL),
    MappedName("tgi", "tgi_request_generated_tokens_sum", Canonical.GENERATION_TOKENS_TOTAL),
    MappedName("llamacpp", "llamacpp:requests_processing", Canonical.RUNNING_REQUESTS),
    MappedName("llamacpp", "llamacpp:requests_deferred", Canonical.WAITING_REQUESTS),
    MappedName(
        "llamacpp", "llamacpp:kv_cache_usage_ratio", Canonical.KV_CACHE_USAGE, combine="avg"
    ),
    MappedName("llamacpp", "llamacpp:prompt_tokens_total", Canonical.PROMPT_TOKENS_TOTAL),
    MappedName("llamacpp", "llamacpp:tokens_predicted_total", Canonical.GENERATION_TOKENS_TOTAL),
    MappedName(
        "dcgm", "DCGM_FI_DEV_GPU_UTIL", Canonical.GPU_UTILIZATION, scale=0.01, combine="avg"
    ),
    MappedName("dcgm", "DCGM_FI_DEV_FB_USED", Canonical.GPU_MEMORY_USED_BYTES, scale=_MIB),
    MappedName("dcgm", "DCGM_FI_DEV_POWER_USAGE", Canonical.GPU_POWER_WATTS),
    # Energy since boot, in millijoules.
    MappedName(
        "dcgm", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", Canonical.GPU_ENERGY_JOULES_TOTAL, 0.001
    ),
)

KNOWN_NAMES: Final[frozenset[str]] = frozenset(m.name for m in NAME_MAP)


class ScrapeStatus(StrEnum):
    """Outcome of one scrape."""

    OK = "ok"
    ERROR = "error"


_ts = pa.timestamp("ns", tz="UTC")

# One row per scrape: when, how it went, and its samples (the series of known names).
SCRAPE_SCHEMA = pa.schema(
    [
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("stage", pa.int32(), nullable=False),
        pa.field("provider", pa.string(), nullable=False),
        pa.field("region", pa.string(), nullable=False),
        pa.field("shard_id", pa.string(), nullable=False),
        pa.field("attempt", pa.int32(), nullable=False),
        pa.field("worker", pa.string(), nullable=False),
        pa.field("scrape_seq", pa.int32(), nullable=False),
        pa.field("scraped_at", _ts, nullable=False),  # when the request was sent
        pa.field("duration_ns", pa.int64(), nullable=False),
        pa.field("status", pa.string(), nullable=False),  # ok | error
        pa.field("http_status", pa.int16()),
        pa.field("error_message", pa.string()),
        pa.field("body_bytes", pa.int64()),
        pa.field("series_dropped", pa.int32()),  # beyond the bounds (scenarios/limits.py)
        pa.field(
            "samples",
            pa.list_(
                pa.struct(
                    [
                        pa.field("metric", pa.string(), nullable=False),
                        pa.field("labels", pa.map_(pa.string(), pa.string())),
                        pa.field("value", pa.float64(), nullable=False),
                    ]
                )
            ),
        ),
    ]
)


def scrapes_to_batch(rows: list[dict[str, object]]) -> pa.RecordBatch:
    """One Arrow batch of scrape rows keyed by :data:`SCRAPE_SCHEMA`'s column names."""
    return pa.RecordBatch.from_pylist(rows, schema=SCRAPE_SCHEMA)


def scrapes_to_ipc(rows: list[dict[str, object]]) -> bytes:
    """Scrape rows as an Arrow IPC stream (schema + one batch), as they travel."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, SCRAPE_SCHEMA) as writer:
        writer.write_batch(scrapes_to_batch(rows))
    return bytes(sink.getvalue().to_pybytes())


def ipc_to_scrapes(payload: bytes) -> pa.Table:
    """The scrape rows of a payload written by :func:`scrapes_to_ipc`."""
    return pa.ipc.open_stream(pa.py_buffer(payload)).read_all().cast(SCRAPE_SCHEMA)
