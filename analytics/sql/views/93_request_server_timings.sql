-- Server timings per request (docs/metrics.md, "Server timings"): what the response
-- itself carried (in band: server_queue_ns, server_ttft_ns, server_prompt_ns) and what
-- the server's OTLP span for it said (server_spans, docs/traces.md), joined on the
-- record's response id, else its server request id. In band wins where both say.
-- One row per request of the `requests` view; NULL where nobody said (unknown).
--   server_queue_ns    waiting before the server scheduled it
--   server_prefill_ns  from scheduled to the first token as the server saw it
--                      (server TTFT minus queue; the span's prefill when no TTFT)
--   server_ttft_ns     arrival to first token at the server (queue + prefill)
--   network_client_ns  client TTFT minus server TTFT: the network, the client and any
--                      proxy (durations only: no clock is shared between machines)
CREATE OR REPLACE VIEW request_server_timings AS
WITH spans AS (
    -- An exporter that retries sends a span twice: its first copy counts.
    SELECT run_id, provider, request_id,
           arg_min(queue_ns, received_at)   AS queue_ns,
           arg_min(ttft_ns, received_at)    AS ttft_ns,
           arg_min(prefill_ns, received_at) AS prefill_ns,
           arg_min(decode_ns, received_at)  AS decode_ns,
           arg_min(e2e_ns, received_at)     AS e2e_ns
    FROM server_spans
    GROUP BY run_id, provider, request_id
),
joined AS (
    SELECT
        r.run_id, r.stage, r.provider, r.region, r.shard_id, r.seq, r.status,
        r.ttft_ns AS client_ttft_ns,
        coalesce(a.request_id, b.request_id) AS span_request_id,
        r.server_queue_ns AS band_queue_ns,
        r.server_ttft_ns AS band_ttft_ns,
        r.server_prompt_ns AS band_prefill_ns,
        r.server_timing_source AS band_source,
        coalesce(a.queue_ns, b.queue_ns) AS span_queue_ns,
        coalesce(a.ttft_ns, b.ttft_ns) AS span_ttft_ns,
        coalesce(a.prefill_ns, b.prefill_ns) AS span_prefill_ns,
        coalesce(a.decode_ns, b.decode_ns) AS span_decode_ns,
        coalesce(a.e2e_ns, b.e2e_ns) AS span_e2e_ns
    FROM requests AS r
    LEFT JOIN spans AS a
        ON a.run_id = r.run_id AND a.provider = r.provider AND a.request_id = r.response_id
    LEFT JOIN spans AS b
        ON a.request_id IS NULL AND b.run_id = r.run_id AND b.provider = r.provider
        AND b.request_id = r.server_request_id
),
merged AS (
    SELECT *,
        coalesce(band_queue_ns, span_queue_ns) AS queue_ns,
        coalesce(
            band_ttft_ns, span_ttft_ns,
            coalesce(band_queue_ns, span_queue_ns) + coalesce(band_prefill_ns, span_prefill_ns)
        ) AS ttft_ns,
        coalesce(band_prefill_ns, span_prefill_ns) AS prefill_only_ns
    FROM joined
)
SELECT
    run_id, stage, provider, region, shard_id, seq, status, client_ttft_ns,
    span_request_id IS NOT NULL AS span_joined,
    CASE
        WHEN span_request_id IS NOT NULL AND band_source IS NOT NULL THEN band_source || '+otlp'
        WHEN span_request_id IS NOT NULL THEN 'otlp'
        ELSE band_source
    END AS server_timing_source,
    queue_ns AS server_queue_ns,
    CASE WHEN ttft_ns IS NOT NULL AND queue_ns IS NOT NULL THEN ttft_ns - queue_ns
         ELSE prefill_only_ns END AS server_prefill_ns,
    ttft_ns AS server_ttft_ns,
    span_decode_ns AS server_decode_ns,
    span_e2e_ns AS server_e2e_ns,
    client_ttft_ns - ttft_ns AS network_client_ns
FROM merged;
