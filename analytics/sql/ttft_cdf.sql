-- TTFT distribution per stage x provider x region of one run, as quantiles at the given
-- fractions (a CDF sampled on its probability axis; successful requests, send-based).
-- Parameters: $run_id, $fractions (DOUBLE[]).
SELECT stage, provider, region, count(ttft_ms) AS n,
       quantile_cont(ttft_ms, $fractions) AS ttft_ms
FROM requests
WHERE run_id = $run_id AND status = 'ok' AND ttft_ms IS NOT NULL
GROUP BY stage, provider, region
ORDER BY stage, provider, region
