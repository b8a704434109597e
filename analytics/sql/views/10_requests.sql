-- One row per request of the accepted attempt of each shard, with derived metrics (ms).
CREATE OR REPLACE VIEW requests AS
SELECT
    r.*,
    r.ttft_ns / 1e6                               AS ttft_ms,
    (r.ttft_ns + r.schedule_lag_ns) / 1e6         AS ttft_from_intent_ms,
    r.ttfot_ns / 1e6                              AS ttfot_ms,
    r.e2e_ns / 1e6                                AS e2e_ms,
    (r.e2e_ns + r.schedule_lag_ns) / 1e6          AS e2e_from_intent_ms,
    r.schedule_lag_ns / 1e6                       AS schedule_lag_ms,
    CASE WHEN r.completion_tokens > 1 AND r.last_token_ns > r.ttft_ns
         THEN (r.last_token_ns - r.ttft_ns) / 1e6 / (r.completion_tokens - 1) END AS tpot_ms,
    CASE WHEN r.completion_tokens > 1 AND r.last_token_ns > r.ttft_ns
         THEN (r.completion_tokens - 1) * 1e9 / (r.last_token_ns - r.ttft_ns) END AS decode_tok_s
FROM request_records AS r
JOIN shards AS s ON s.run_id = r.run_id AND s.shard_id = r.shard_id AND s.accepted_attempt = r.attempt;
