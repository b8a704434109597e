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
