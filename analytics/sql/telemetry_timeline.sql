-- Queue depth and KV use against TTFT over one run, in $buckets equal time buckets from
-- the run's first send (as errors_over_time.sql; scrapes before it fall in bucket 0),
-- per provider × region (docs/telemetry.md). A server figure is the mean of a shard's
-- scrapes in the bucket, then summed over the shards scraping at once (counts: each
-- simulated part serves its own endpoint) or averaged (kv_cache_usage, a share); TTFT
-- is the median of the requests sent in the bucket. Parameters: $run_id, $buckets.
WITH sent AS (
    SELECT provider, region, epoch_us(sent_at) AS t, ttft_ms
    FROM requests
    WHERE run_id = $run_id AND sent_at IS NOT NULL
),
server AS (
    SELECT provider, region, shard_id, metric, epoch_us(scraped_at) AS t, value
    FROM server_metrics_canonical
    WHERE run_id = $run_id
      AND metric IN ('running_requests', 'waiting_requests', 'kv_cache_usage')
),
bounds AS (
    SELECT coalesce((SELECT min(t) FROM sent), (SELECT min(t) FROM server)) AS t0,
           greatest((SELECT max(t) FROM sent), (SELECT max(t) FROM server)) AS t1
),
grid AS (
    SELECT t0, t1, greatest(t1 - t0, 1) / $buckets AS width FROM bounds
),
bucketed AS (
    SELECT s.provider, s.region, s.metric, s.shard_id, s.value,
           least(greatest(CAST(floor((s.t - g.t0) / g.width) AS INTEGER), 0), $buckets - 1)
               AS bucket
    FROM server AS s, grid AS g
),
per_shard AS (
    SELECT provider, region, metric, shard_id, bucket, avg(value) AS value
    FROM bucketed
    GROUP BY provider, region, metric, shard_id, bucket
),
figures AS (
    SELECT provider, region, metric, bucket,
           CASE WHEN metric = 'kv_cache_usage' THEN avg(value) ELSE sum(value) END AS value
    FROM per_shard
    GROUP BY provider, region, metric, bucket
),
sent_bucketed AS (
    SELECT r.provider, r.region, r.ttft_ms,
           least(greatest(CAST(floor((r.t - g.t0) / g.width) AS INTEGER), 0), $buckets - 1)
               AS bucket
    FROM sent AS r, grid AS g
    WHERE r.ttft_ms IS NOT NULL
),
latency AS (
    SELECT provider, region, 'ttft_p50_ms' AS metric, bucket,
           quantile_cont(ttft_ms, 0.5) AS value
    FROM sent_bucketed
    GROUP BY provider, region, bucket
)
SELECT f.provider, f.region, f.metric, f.bucket, f.value, (g.t1 - g.t0) / 1e6 AS duration_s
FROM (SELECT * FROM figures UNION ALL SELECT * FROM latency) AS f, grid AS g
ORDER BY f.provider, f.region, f.metric, f.bucket
