"""The Arrow schema of a request record: the one definition every component shares.

Workers build record batches with it, the DuckDB ``request_records`` table mirrors it
(a test holds the two together), and users read it back through SQL or Parquet.

Durations are integer nanoseconds from ``time.perf_counter_ns()`` (docs/metrics.md), measured
from ``sent`` unless the name says otherwise. The ``*_at`` columns are wall-clock UTC
instants derived from the same stamps; they exist to correlate events across machines
and are never used to compute a duration.
"""

from __future__ import annotations

import pyarrow as pa

RECORD_SCHEMA_VERSION = 1

STAMPS = (
    "intended_start",
    "sent",
    "first_byte",
    "first_token",
    "first_output_token",
    "last_token",
    "end",
)

_ts = pa.timestamp("ns", tz="UTC")

REQUEST_RECORD_SCHEMA = pa.schema(
    [
        # identity
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("stage", pa.int32(), nullable=False),
        pa.field("shard_id", pa.string(), nullable=False),
        pa.field("attempt", pa.int32(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("provider", pa.string(), nullable=False),
        pa.field("model", pa.string(), nullable=False),
        pa.field("region", pa.string(), nullable=False),
        pa.field("worker", pa.string(), nullable=False),
        # load
        pa.field("load_kind", pa.string(), nullable=False),
        pa.field("concurrency", pa.int32(), nullable=False),
        pa.field("planned_prompt_tokens", pa.int32(), nullable=False),
        pa.field("planned_output_tokens", pa.int32(), nullable=False),
        # wall-clock instants of each stamp (correlation only)
        *(pa.field(f"{stamp}_at", _ts) for stamp in STAMPS),
        # durations (ns)
        pa.field("schedule_lag_ns", pa.int64()),  # sent - intended_start
        pa.field("first_byte_ns", pa.int64()),  # first_byte - sent
        pa.field("ttft_ns", pa.int64()),  # first_token - sent
        pa.field("ttfot_ns", pa.int64()),  # first_output_token - sent
        pa.field("last_token_ns", pa.int64()),  # last_token - sent
        pa.field("e2e_ns", pa.int64()),  # end - sent
        pa.field("itl_ns", pa.list_(pa.int64())),  # gaps between token-bearing events
        # token counts
        pa.field("token_events", pa.int32(), nullable=False),
        pa.field("prompt_tokens", pa.int32()),
        pa.field("completion_tokens", pa.int32()),
        pa.field("reasoning_tokens", pa.int32()),
        # how completion_tokens was counted: usage (the server's) | events (token events)
        pa.field("token_count_source", pa.string()),
        # server-reported timings where the dialect has them (e.g. llama.cpp), ns
        pa.field("server_prompt_ns", pa.int64()),
        pa.field("server_decode_ns", pa.int64()),
        # retries on 429/Retry-After when the provider opts in, and time spent waiting
        pa.field("retries", pa.int32()),
        pa.field("retry_wait_ns", pa.int64()),
        # pairs a shadow request with the primary's record (shadow traffic); else NULL
        pa.field("request_key", pa.string()),
        # outcome
        pa.field("status", pa.string(), nullable=False),  # ok | error
        pa.field("error_class", pa.string()),
        pa.field("http_status", pa.int16()),
        pa.field("error_message", pa.string()),
        # how planned_prompt_tokens was made true (docs/lengths.md): tokenizer |
        # calibrated | warmup | words | estimate; the calibration it used, if any
        pa.field("planned_prompt_source", pa.string()),
        pa.field("prompt_tokens_per_word", pa.float64()),
        pa.field("prompt_template_tokens", pa.float64()),
        # tool calls (workload.tools): whether the request offered tools, whether the
        # answer streamed a tool call, when its first delta arrived (ns since sent) and
        # how many calls it made
        pa.field("tools_offered", pa.bool_()),
        pa.field("tool_call", pa.bool_()),
        pa.field("tool_call_at_ns", pa.int64()),
        pa.field("tool_calls", pa.int32()),
        # token truth (docs/metrics.md, "Token counts", "Incomplete answers"): how
        # prompt_tokens was counted (usage | tokenizer; NULL: unknown, the server reported
        # none and the workload has no tokenizer), and why the answer ended in one
        # vocabulary (stop | length | tool_calls | content_filter | the server's word;
        # NULL for dialects that never say, and for failed requests)
        pa.field("prompt_count_source", pa.string()),
        pa.field("finish_reason", pa.string()),
        # multi-turn sessions (workload.sessions, a replayed session log): the session's
        # number in its stage, the turn (from 1) of the turns it planned, the earlier
        # turns' tokens sent with this one, and on the session's last turn why it ended
        # (done | error | context_cap | stage_end); NULL for requests outside a session
        pa.field("session_id", pa.int64()),
        pa.field("turn", pa.int32()),
        pa.field("session_turns", pa.int32()),
        pa.field("context_tokens", pa.int32()),
        pa.field("session_end", pa.string()),
        # datasets (workload.dataset, .prompts, .replay; schema v14): the uploaded
        # dataset the prompt came from and its 0-based row in the file; NULL when generated
        pa.field("dataset_id", pa.string()),
        pa.field("dataset_row", pa.int64()),
        # images (workload.images; schema v16): how many the request carried, their encoded bytes
        # and pixels, a digest of their bytes (equal for byte-identical images), and the
        # image tokens the server reported (usage.prompt_tokens_details.image_tokens;
        # NULL where it reports none)
        pa.field("images", pa.int32()),
        pa.field("image_bytes", pa.int64()),
        pa.field("image_pixels", pa.int64()),
        pa.field("image_digest", pa.string()),
        pa.field("image_prompt_tokens", pa.int32()),
        # failover (scenario.upstreams, docs/failover.md; schema v17): the id the client
        # sent with the request (header x-tokenbench-request and the body's user field)
        # and a hash of its messages, by which the upstreams' logs are joined to it; NULL
        # in runs without upstreams
        pa.field("client_request_id", pa.string()),
        pa.field("prompt_hash", pa.string()),
        # where the time goes (schema v20, docs/metrics.md): the response's own id and
        # the request id header the server sent (server-side timings are joined on
        # them); timings the response carried (queue, TTFT as the server saw it, ns) and
        # their source; prefix-cache tokens read and written as usage reported them, and
        # the tokens the plan made repeat a prefix already sent; connection phases (ns,
        # NULL on a reused connection), the request written (ns since sent), and whether
        # the request opened its connection. NULL: the provider or transport did not say.
        pa.field("response_id", pa.string()),
        pa.field("server_request_id", pa.string()),
        pa.field("server_queue_ns", pa.int64()),
        pa.field("server_ttft_ns", pa.int64()),
        pa.field("server_timing_source", pa.string()),
        pa.field("cached_tokens", pa.int32()),
        pa.field("cache_write_tokens", pa.int32()),
        pa.field("planned_cached_tokens", pa.int32()),
        pa.field("dns_ns", pa.int64()),
        pa.field("connect_ns", pa.int64()),
        pa.field("tls_ns", pa.int64()),
        pa.field("request_written_ns", pa.int64()),
        pa.field("connection_new", pa.bool_()),
    ],
    metadata={"tokenbench.record_schema_version": str(RECORD_SCHEMA_VERSION)},
)


def records_to_batch(rows: list[dict[str, object]]) -> pa.RecordBatch:
    """Build one record batch from row dicts keyed by the schema's column names."""
    return pa.RecordBatch.from_pylist(rows, schema=REQUEST_RECORD_SCHEMA)


def batch_to_ipc(batch: pa.RecordBatch) -> bytes:
    """Serialize a batch as an Arrow IPC stream (schema + one batch)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, REQUEST_RECORD_SCHEMA) as writer:
        writer.write_batch(batch)
    return bytes(sink.getvalue().to_pybytes())


def ipc_to_table(payload: bytes) -> pa.Table:
    """Read an Arrow IPC stream written by :func:`batch_to_ipc`."""
    return pa.ipc.open_stream(pa.py_buffer(payload)).read_all()
