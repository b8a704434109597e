-- How the scrapes of one run went, per provider × region × stage (docs/telemetry.md):
-- scrapes, failed ones and the most frequent failure, mean scrape time, series dropped
-- beyond the bounds. Parameters: $run_id.
SELECT provider, region, stage,
       count(*)                                         AS scrapes,
       count(*) FILTER (status = 'error')               AS errors,
       mode(error_message) FILTER (status = 'error')    AS top_error,
       avg(duration_ns) / 1e6                           AS mean_scrape_ms,
       coalesce(sum(series_dropped), 0)                 AS series_dropped
FROM server_metric_scrapes
WHERE run_id = $run_id
GROUP BY provider, region, stage
ORDER BY provider, region, stage
