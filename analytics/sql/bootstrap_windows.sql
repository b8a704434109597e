-- Sorted values around each percentile the report puts a confidence interval on, for the
-- bootstrap in analytics/stats/percentiles.py: per group, how many successful requests lie below the
-- point estimate (the pivot), the largest of those (descending) and the smallest of the
-- rest (ascending), at most $w50 / $w99 of each. Top-n aggregates keep this one pass.
-- Parameters: $run_id, $w50, $w99; the caller registers `boot_pivots` (one row per
-- stage x provider x region with the point estimates).
SELECT
    p.stage, p.provider, p.region,
    count(*) FILTER (q.ttft_ms < p.ttft_p50) AS ttft_p50_below,
    max(q.ttft_ms, $w50) FILTER (q.ttft_ms < p.ttft_p50) AS ttft_p50_lower,
    min(q.ttft_ms, $w50) FILTER (q.ttft_ms >= p.ttft_p50) AS ttft_p50_upper,
    count(*) FILTER (q.ttft_ms < p.ttft_p99) AS ttft_p99_below,
    max(q.ttft_ms, $w99) FILTER (q.ttft_ms < p.ttft_p99) AS ttft_p99_lower,
    min(q.ttft_ms, $w99) FILTER (q.ttft_ms >= p.ttft_p99) AS ttft_p99_upper,
    count(*) FILTER (q.tpot_ms < p.tpot_p50) AS tpot_p50_below,
    max(q.tpot_ms, $w50) FILTER (q.tpot_ms < p.tpot_p50) AS tpot_p50_lower,
    min(q.tpot_ms, $w50) FILTER (q.tpot_ms >= p.tpot_p50) AS tpot_p50_upper,
    count(*) FILTER (q.tpot_ms < p.tpot_p99) AS tpot_p99_below,
    max(q.tpot_ms, $w99) FILTER (q.tpot_ms < p.tpot_p99) AS tpot_p99_lower,
    min(q.tpot_ms, $w99) FILTER (q.tpot_ms >= p.tpot_p99) AS tpot_p99_upper,
    count(*) FILTER (q.e2e_ms < p.e2e_p50) AS e2e_p50_below,
    max(q.e2e_ms, $w50) FILTER (q.e2e_ms < p.e2e_p50) AS e2e_p50_lower,
    min(q.e2e_ms, $w50) FILTER (q.e2e_ms >= p.e2e_p50) AS e2e_p50_upper,
    count(*) FILTER (q.e2e_ms < p.e2e_p99) AS e2e_p99_below,
    max(q.e2e_ms, $w99) FILTER (q.e2e_ms < p.e2e_p99) AS e2e_p99_lower,
    min(q.e2e_ms, $w99) FILTER (q.e2e_ms >= p.e2e_p99) AS e2e_p99_upper,
    count(*) FILTER (q.ttft_from_intent_ms < p.ttft_intent_p50 AND q.load_kind = 'open') AS ttft_intent_p50_below,
    max(q.ttft_from_intent_ms, $w50) FILTER (q.ttft_from_intent_ms < p.ttft_intent_p50 AND q.load_kind = 'open') AS ttft_intent_p50_lower,
    min(q.ttft_from_intent_ms, $w50) FILTER (q.ttft_from_intent_ms >= p.ttft_intent_p50 AND q.load_kind = 'open') AS ttft_intent_p50_upper,
    count(*) FILTER (q.ttft_from_intent_ms < p.ttft_intent_p99 AND q.load_kind = 'open') AS ttft_intent_p99_below,
    max(q.ttft_from_intent_ms, $w99) FILTER (q.ttft_from_intent_ms < p.ttft_intent_p99 AND q.load_kind = 'open') AS ttft_intent_p99_lower,
    min(q.ttft_from_intent_ms, $w99) FILTER (q.ttft_from_intent_ms >= p.ttft_intent_p99 AND q.load_kind = 'open') AS ttft_intent_p99_upper,
    count(*) FILTER (q.e2e_from_intent_ms < p.e2e_intent_p50 AND q.load_kind = 'open') AS e2e_intent_p50_below,
    max(q.e2e_from_intent_ms, $w50) FILTER (q.e2e_from_intent_ms < p.e2e_intent_p50 AND q.load_kind = 'open') AS e2e_intent_p50_lower,
    min(q.e2e_from_intent_ms, $w50) FILTER (q.e2e_from_intent_ms >= p.e2e_intent_p50 AND q.load_kind = 'open') AS e2e_intent_p50_upper,
    count(*) FILTER (q.e2e_from_intent_ms < p.e2e_intent_p99 AND q.load_kind = 'open') AS e2e_intent_p99_below,
    max(q.e2e_from_intent_ms, $w99) FILTER (q.e2e_from_intent_ms < p.e2e_intent_p99 AND q.load_kind = 'open') AS e2e_intent_p99_lower,
    min(q.e2e_from_intent_ms, $w99) FILTER (q.e2e_from_intent_ms >= p.e2e_intent_p99 AND q.load_kind = 'open') AS e2e_intent_p99_upper
FROM requests AS q
JOIN boot_pivots AS p USING (stage, provider, region)
WHERE q.run_id = $run_id AND q.status = 'ok'
GROUP BY p.stage, p.provider, p.region
