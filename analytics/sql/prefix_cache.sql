-- Prefix cache per provider × stage × region of one run (docs/metrics.md, "Prefix
-- cache"): the successful requests whose usage said how many prompt tokens the server
-- read from its cache, those tokens, the client-observed hit rate (cached over prompt
-- tokens of those requests, %; NULL when none said: unknown), the planned rate of a
-- workload with a target (planned repeated over planned prompt tokens, %), the target
-- itself (%), and the stage's cache resets (outcomes, in order). Parameters: $run_id.
WITH recs AS (
    SELECT
        provider, stage, region,
        count(*) FILTER (cached_tokens IS NOT NULL AND prompt_tokens IS NOT NULL)
                                                                        AS cache_reported,
        sum(cached_tokens) FILTER (prompt_tokens IS NOT NULL)           AS cached_tokens,
        100 * sum(cached_tokens) FILTER (prompt_tokens IS NOT NULL)
            / nullif(sum(prompt_tokens) FILTER (cached_tokens IS NOT NULL), 0)
                                                                        AS cache_hit_pct,
        100 * sum(planned_cached_tokens)
            / nullif(sum(planned_prompt_tokens) FILTER (planned_cached_tokens IS NOT NULL), 0)
                                                                        AS cache_planned_pct
    FROM requests
    WHERE run_id = $run_id AND status = 'ok'
    GROUP BY provider, stage, region
),
resets AS (
    SELECT
        provider, stage, region,
        string_agg(
            status || CASE WHEN http_status IS NOT NULL AND status <> 'ok'
                           THEN ' (' || http_status || ')' ELSE '' END,
            ', ' ORDER BY started_at
        )                                                               AS cache_reset
    FROM cache_resets
    WHERE run_id = $run_id
    GROUP BY provider, stage, region
),
target AS (
    SELECT 100 * try_cast(
               json_extract(scenario, '$.workload.prefix_cache.target_hit_rate') AS DOUBLE
           )                                                            AS cache_target_pct
    FROM runs
    WHERE run_id = $run_id
)
SELECT
    coalesce(r.provider, x.provider) AS provider,
    coalesce(r.stage, x.stage)       AS stage,
    coalesce(r.region, x.region)     AS region,
    coalesce(r.cache_reported, 0)    AS cache_reported,
    r.cached_tokens, r.cache_hit_pct, r.cache_planned_pct,
    t.cache_target_pct,
    x.cache_reset
FROM recs AS r
FULL OUTER JOIN resets AS x USING (provider, stage, region)
CROSS JOIN target AS t
