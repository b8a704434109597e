-- Failover per provider × stage × region of one run with upstreams (docs/failover.md):
-- what clients saw (requests, error rate), how many requests the upstream logs account
-- for, the share of those that needed a fallback, TTFT p50/p99 of the successful ones
-- that fell back and of those served at their first try, and the mean time from a
-- request's first attempt to the one that served it, at the upstreams.
-- Parameters: $run_id.
SELECT
    provider, stage, region,
    count(*)                                                            AS requests,
    100 * avg(CASE WHEN status = 'error' THEN 1 ELSE 0 END)             AS client_error_pct,
    count(*) FILTER (tries > 0)                                         AS attributed,
    count(*) FILTER (fell_back)                                         AS fell_back,
    100 * avg(CASE WHEN fell_back THEN 1 ELSE 0 END) FILTER (tries > 0) AS fallback_pct,
    count(*) FILTER (status = 'error' AND fell_back)                    AS fell_back_errors,
    quantile_cont(ttft_ms, 0.5) FILTER (status = 'ok' AND fell_back)    AS ttft_fell_back_p50_ms,
    quantile_cont(ttft_ms, 0.99) FILTER (status = 'ok' AND fell_back)   AS ttft_fell_back_p99_ms,
    quantile_cont(ttft_ms, 0.5) FILTER (status = 'ok' AND tries = 1)    AS ttft_first_try_p50_ms,
    quantile_cont(ttft_ms, 0.99) FILTER (status = 'ok' AND tries = 1)   AS ttft_first_try_p99_ms,
    avg(failover_ms) FILTER (fell_back)                                 AS failover_mean_ms
FROM request_upstreams
WHERE run_id = $run_id
GROUP BY provider, stage, region
ORDER BY stage, provider, region
