-- ITL distribution per stage x provider x region of one run, as quantiles at the given
-- fractions (a CDF sampled on its probability axis; every gap of every successful request).
-- Parameters: $run_id, $fractions (DOUBLE[]).
SELECT stage, provider, region, count(itl_ms) AS n,
       quantile_cont(itl_ms, $fractions) AS itl_ms
FROM token_gaps
WHERE run_id = $run_id
GROUP BY stage, provider, region
ORDER BY stage, provider, region
