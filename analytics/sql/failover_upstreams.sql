-- Each upstream's own view per provider × stage × region of a run with upstreams: the
-- attempts it received for those requests, how many were first tries, how it answered
-- (200, 429, 5xx, reset; cut and unfinished streams count as errors too) and its error
-- rate. Parameters: $run_id.
SELECT
    r.provider, r.stage, r.region, a.upstream,
    count(*)                                                            AS received,
    count(*) FILTER (a.try = 1)                                         AS first_tries,
    count(*) FILTER (a.outcome = 'ok')                                  AS ok,
    count(*) FILTER (a.outcome = 'http_429')                            AS http_429,
    count(*) FILTER (a.outcome = 'http_5xx')                            AS http_5xx,
    count(*) FILTER (a.outcome = 'reset')                               AS reset,
    count(*) FILTER (a.outcome NOT IN ('ok', 'http_429', 'http_5xx', 'reset')) AS other_errors,
    100 * avg(CASE WHEN a.outcome = 'ok' THEN 0 ELSE 1 END)             AS error_pct
FROM upstream_attempts AS a
JOIN requests AS r USING (run_id, shard_id, attempt, seq)
WHERE a.run_id = $run_id
GROUP BY r.provider, r.stage, r.region, a.upstream
ORDER BY r.stage, r.provider, r.region, a.upstream
