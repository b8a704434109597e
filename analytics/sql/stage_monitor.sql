-- One stage's requests so far, per provider × region: what the control plane decides a
-- stage's early end and a capacity search's verdicts on (docs/answers.md). It reads the
-- raw records of the attempts named in $attempts ('shard_id#attempt': the attempts that
-- count, while they run or once settled), so a running stage is judged exactly as it
-- will be once settled. Requests intended to start within a shard's first $warmup_us µs
-- are left out of the counts and the percentile (the warm-up is not steady state).
-- Parameters: $run_id, $stage, $attempts, $warmup_us, $slo_ttft_ms, $slo_tpot_ms,
-- $slo_e2e_ms (NULL: no objective on it), $metric (ttft | tpot | e2e), $quantile, $z.
-- The derived latencies are those of the `requests` view (sql/views/10_requests.sql).
WITH rec AS (
    SELECT
        r.provider, r.region, r.shard_id, r.status, r.load_kind,
        epoch_us(r.intended_start_at)                                   AS t_us,
        r.ttft_ns / 1e6                                                 AS ttft_ms,
        (r.ttft_ns + r.schedule_lag_ns) / 1e6                           AS ttft_from_intent_ms,
        r.e2e_ns / 1e6                                                  AS e2e_ms,
        (r.e2e_ns + r.schedule_lag_ns) / 1e6                            AS e2e_from_intent_ms,
        CASE WHEN r.completion_tokens > 1 AND r.last_token_ns > r.ttft_ns
             THEN (r.last_token_ns - r.ttft_ns) / 1e6 / (r.completion_tokens - 1) END AS tpot_ms
    FROM request_records AS r
    WHERE r.run_id = $run_id AND r.stage = $stage
      AND list_contains($attempts, r.shard_id || '#' || r.attempt)
),
timed AS (
    SELECT *,
           t_us - min(t_us) OVER (PARTITION BY shard_id)                AS since_us,
           CASE $metric WHEN 'ttft' THEN ttft_ms WHEN 'tpot' THEN tpot_ms ELSE e2e_ms END
                                                                        AS metric_ms
    FROM rec
),
steady AS (
    SELECT
        provider, region,
        count(*)                                                        AS requests,
        count(*) FILTER (status = 'ok')                                 AS ok,
        count(*) FILTER (slo_met(status, load_kind, ttft_ms, ttft_from_intent_ms, tpot_ms,
                                 e2e_ms, e2e_from_intent_ms,
                                 $slo_ttft_ms, $slo_tpot_ms, $slo_e2e_ms)) AS met,
        quantile_cont(metric_ms, $quantile) FILTER (status = 'ok')      AS estimate,
        list_sort(list(metric_ms) FILTER (status = 'ok' AND metric_ms IS NOT NULL)) AS sorted
    FROM timed
    WHERE since_us >= $warmup_us
    GROUP BY ALL
),
-- TTFT from intent by quarter of the intended starts of the successful requests so far
-- (warm-up included: a queue that grows from the first second is the point).
quartered AS (
    SELECT
        provider, region, ttft_from_intent_ms,
        least(3, floor(4 * (t_us - min(t_us) OVER w)
                       / nullif(max(t_us) OVER w - min(t_us) OVER w, 0)))::INTEGER AS q
    FROM timed
    WHERE status = 'ok' AND ttft_from_intent_ms IS NOT NULL
    WINDOW w AS (PARTITION BY provider, region)
),
quarters AS (
    SELECT
        provider, region,
        [quantile_cont(ttft_from_intent_ms, 0.5) FILTER (q = 0),
         quantile_cont(ttft_from_intent_ms, 0.5) FILTER (q = 1),
         quantile_cont(ttft_from_intent_ms, 0.5) FILTER (q = 2),
         quantile_cont(ttft_from_intent_ms, 0.5) FILTER (q = 3)]        AS ttft_quarters_ms,
        count(*)                                                        AS completed_ok
    FROM quartered
    GROUP BY ALL
),
ranked AS (
    SELECT
        *,
        len(sorted)                                                     AS n,
        floor(len(sorted) * $quantile
              - $z * sqrt(len(sorted) * $quantile * (1 - $quantile)))::BIGINT AS low_rank,
        ceil(len(sorted) * $quantile
             + $z * sqrt(len(sorted) * $quantile * (1 - $quantile)))::BIGINT + 1 AS high_rank
    FROM steady
)
SELECT
    r.provider, r.region, r.requests, r.ok, r.met, r.n, r.estimate,
    CASE WHEN r.low_rank >= 1 AND r.high_rank <= r.n THEN r.sorted[r.low_rank] END  AS low,
    CASE WHEN r.low_rank >= 1 AND r.high_rank <= r.n THEN r.sorted[r.high_rank] END AS high,
    q.ttft_quarters_ms
FROM ranked AS r
LEFT JOIN quarters AS q USING (provider, region)
ORDER BY r.provider, r.region
