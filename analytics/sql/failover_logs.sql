-- The run's upstream logs as a whole: where each upstream listened, the entries stored,
-- how many no request matched (the gateway's own probes, attempts of a shard attempt
-- that was not accepted) and how many the bounded log dropped before they were read.
-- Parameters: $run_id.
SELECT
    l.upstream, l.port, l.entries,
    l.entries - (SELECT count(*) FROM upstream_attempts AS a
                 WHERE a.run_id = l.run_id AND a.upstream = l.upstream)  AS unmatched,
    l.missed
FROM upstream_logs AS l
WHERE l.run_id = $run_id
ORDER BY l.upstream
