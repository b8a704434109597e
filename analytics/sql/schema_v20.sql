-- tokenbench DuckDB schema, version 20: where the time goes (docs/metrics.md, "Server
-- timings", "Prefix cache", "Connection phases"). Every new column is NULL where the
-- provider or the transport did not say: unknown, never zero.

-- The response's own id (the stream's `id`, a message's or response's id) and the
-- request id the server sent in a header: what server-side timings are joined on.
ALTER TABLE request_records ADD COLUMN IF NOT EXISTS response_id VARCHAR;
ALTER TABLE request_records ADD COLUMN IF NOT EXISTS server_request_id VARCHAR;
-- Server timings the response itself carried (headers, a timings object), ns:
-- queue time, and time to first token as the server saw it; where they came from.
-- (Prefill and decode are server_prompt_ns and server_decode_ns, since v1.)
ALTER TABLE request_records ADD COLUMN IF NOT EXISTS server_queue_ns BIGINT;
ALTER TABLE request_records ADD COLUMN IF NOT EXISTS server_ttft_ns BIGINT;
ALTER TABLE request_records ADD COLUMN IF NOT EXISTS server_timing_source VARCHAR;
-- Prefix cache: prompt tokens the server read from its cache, and (Anthropic) tokens it
-- wrote to it; the prompt tokens the plan built to repeat a prefix already sent.
ALTER TABLE request_records ADD COLUMN IF NOT EXISTS cached_tokens INTEGER;
ALTER TABLE request_records ADD COLUMN IF NOT EXISTS cache_write_tokens INTEGER;
ALTER TABLE request_records ADD COLUMN IF NOT EXISTS planned_cached_tokens INTEGER;
-- Connection phases of the request, ns (NULL on a reused connection, which had none),
-- the request written (since sent), and whether the request opened its connection.
ALTER TABLE request_records ADD COLUMN IF NOT EXISTS dns_ns BIGINT;
ALTER TABLE request_records ADD COLUMN IF NOT EXISTS connect_ns BIGINT;
ALTER TABLE request_records ADD COLUMN IF NOT EXISTS tls_ns BIGINT;
ALTER TABLE request_records ADD COLUMN IF NOT EXISTS request_written_ns BIGINT;
ALTER TABLE request_records ADD COLUMN IF NOT EXISTS connection_new BOOLEAN;

-- Prefix cache: cache resets (docs/providers.md, "Cache reset"). One row per reset a
-- worker sent before a stage's load (one part of each provider, region and stage):
-- when it started, its outcome (ok: the server emptied its cache; failed: it answered
-- an error status; error: no answer, or refused before sending) and the HTTP status.
CREATE TABLE IF NOT EXISTS cache_resets (
    run_id VARCHAR NOT NULL,
    stage INTEGER NOT NULL,
    provider VARCHAR NOT NULL,
    region VARCHAR NOT NULL,
    worker VARCHAR,
    shard_id VARCHAR NOT NULL,
    attempt INTEGER NOT NULL,
    started_at TIMESTAMPTZ,
    status VARCHAR NOT NULL,
    http_status INTEGER,
    message VARCHAR
);

-- Prefix cache: prices and pre-aggregates. The list price of prompt tokens read from the
-- provider's prompt cache (USD per 1M; NULL: they cost input_per_mtok), and the cached
-- prompt tokens of a shard's successful requests (NULL when no request reported any),
-- so that a stage's cost reflects its cache hits in the stored summaries as in the view.
ALTER TABLE providers ADD COLUMN IF NOT EXISTS cached_input_per_mtok DOUBLE;
ALTER TABLE shard_summaries ADD COLUMN IF NOT EXISTS cached_tokens HUGEINT;

-- Server timings from OTLP traces (docs/traces.md): one row per span a server exported
-- to POST /v1/otlp/v1/traces, stored for each running run of the sender's team that
-- names the span's provider. A span never changes a record: the view
-- `request_server_timings` joins it on the record's response or server request id.
-- Durations in ns, NULL where the span did not say.
CREATE TABLE IF NOT EXISTS server_spans (
    run_id       VARCHAR NOT NULL,
    provider     VARCHAR NOT NULL,
    request_id   VARCHAR NOT NULL,   -- gen_ai.request.id (vLLM: the response id chatcmpl-...)
    queue_ns     BIGINT,             -- gen_ai.latency.time_in_queue
    ttft_ns      BIGINT,             -- gen_ai.latency.time_to_first_token
    prefill_ns   BIGINT,             -- gen_ai.latency.time_in_model_prefill
    decode_ns    BIGINT,             -- gen_ai.latency.time_in_model_decode
    e2e_ns       BIGINT,             -- gen_ai.latency.e2e
    trace_id     VARCHAR,
    span_name    VARCHAR,
    received_at  TIMESTAMPTZ NOT NULL
);
-- One row per export request received: who sent it and what became of its spans
-- (stored: kept for at least one run; refused: no run the sender may write names its
-- provider; dropped: malformed, hostile, or beyond the per-request bound).
CREATE TABLE IF NOT EXISTS server_span_receipts (
    received_at  TIMESTAMPTZ NOT NULL,
    team         VARCHAR NOT NULL,
    token_id     VARCHAR NOT NULL,
    encoding     VARCHAR NOT NULL,   -- protobuf | json
    spans        INTEGER NOT NULL,
    stored       INTEGER NOT NULL,
    refused      INTEGER NOT NULL,
    dropped      INTEGER NOT NULL
);
