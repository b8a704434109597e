-- Log-bucketed histograms of one settled shard's latency metrics (successful requests;
-- intent-based ones for open loop only), bucket = ceil(ln(v) / ln γ) (analytics/stats/sketch.py).
-- Parameters: $run_id, $shard_id, $log_gamma, $zero_bucket.
INSERT INTO shard_histograms
WITH ok AS (
    SELECT *
    FROM requests
    WHERE run_id = $run_id AND shard_id = $shard_id AND status = 'ok'
),
vals AS (
    SELECT 'ttft' AS metric, ttft_ms AS v FROM ok
    UNION ALL SELECT 'tpot', tpot_ms FROM ok
    UNION ALL SELECT 'e2e', e2e_ms FROM ok
    UNION ALL SELECT 'ttft_intent', ttft_from_intent_ms FROM ok WHERE load_kind = 'open'
    UNION ALL SELECT 'e2e_intent', e2e_from_intent_ms FROM ok WHERE load_kind = 'open'
    UNION ALL SELECT 'decode_tok_s', decode_tok_s FROM ok
    UNION ALL SELECT 'itl', unnest(itl_ns) / 1e6 FROM ok
)
SELECT $run_id, $shard_id, metric,
       CASE WHEN v > 0 THEN CAST(ceil(ln(v) / $log_gamma) AS INTEGER) ELSE $zero_bucket END,
       count(*)
FROM vals
WHERE v IS NOT NULL
GROUP BY ALL
