-- One row per scrape × canonical figure: running_requests, waiting_requests,
-- kv_cache_usage (0..1), prompt_tokens_total, generation_tokens_total (counters, as
-- exposed), gpu_utilization (0..1), gpu_memory_used_bytes, and the counters as rates
-- between consecutive scrapes of one shard attempt (prompt_tokens_per_s,
-- generation_tokens_per_s; none across a counter reset). Every attempt's scrapes are
-- kept: they describe the server, whichever attempt's records were accepted.
CREATE OR REPLACE VIEW server_metrics_canonical AS
WITH mapped AS (
    SELECT m.run_id, m.stage, m.provider, m.region, m.shard_id, m.attempt, m.scrape_seq,
           m.scraped_at, n.canonical, n.combine, m.value * n.scale AS value
    FROM server_metrics AS m
    JOIN server_metric_names AS n ON n.metric = m.metric
),
figures AS (
    SELECT run_id, stage, provider, region, shard_id, attempt, scrape_seq, scraped_at,
           canonical AS metric,
           CASE WHEN bool_or(combine = 'avg') THEN avg(value) ELSE sum(value) END AS value
    FROM mapped
    GROUP BY run_id, stage, provider, region, shard_id, attempt, scrape_seq, scraped_at,
             canonical
),
counters AS (
    SELECT f.*, r.rate,
           lag(f.value) OVER w      AS previous,
           lag(f.scraped_at) OVER w AS previous_at
    FROM figures AS f
    JOIN (VALUES ('prompt_tokens_total', 'prompt_tokens_per_s'),
                 ('generation_tokens_total', 'generation_tokens_per_s')) AS r(metric, rate)
      ON r.metric = f.metric
    WINDOW w AS (PARTITION BY f.run_id, f.shard_id, f.attempt, f.metric ORDER BY f.scrape_seq)
)
SELECT run_id, stage, provider, region, shard_id, attempt, scrape_seq, scraped_at, metric,
       value
FROM figures
UNION ALL
SELECT run_id, stage, provider, region, shard_id, attempt, scrape_seq, scraped_at,
       rate AS metric,
       (value - previous) / ((epoch_us(scraped_at) - epoch_us(previous_at)) / 1e6) AS value
FROM counters
WHERE previous IS NOT NULL AND value >= previous AND scraped_at > previous_at;
