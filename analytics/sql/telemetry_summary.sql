-- Server telemetry per provider × region × stage of one run (docs/telemetry.md): the
-- samples, mean and max of each canonical figure (counters as rates), over the scrapes
-- taken while the stage's requests were in flight (its first send to its last end), so
-- the idle server before and after a stage does not dilute it. Parameters: $run_id.
WITH spans AS (
    SELECT provider, region, stage,
           min(sent_at)                    AS first_send,
           max(coalesce(end_at, sent_at))  AS last_end
    FROM requests
    WHERE run_id = $run_id AND sent_at IS NOT NULL
    GROUP BY provider, region, stage
)
SELECT c.provider, c.region, c.stage, c.metric,
       count(*)     AS samples,
       avg(c.value) AS mean,
       max(c.value) AS max
FROM server_metrics_canonical AS c
JOIN spans AS s ON s.provider = c.provider AND s.region = c.region AND s.stage = c.stage
WHERE c.run_id = $run_id
  AND c.scraped_at BETWEEN s.first_send AND s.last_end
  -- counters: their rates are figures, their running totals are not
  AND c.metric NOT IN ('prompt_tokens_total', 'generation_tokens_total',
                       'prefix_cache_queries_total', 'prefix_cache_hits_total',
                       'spec_drafts_total', 'spec_draft_tokens_total',
                       'spec_accepted_tokens_total', 'gpu_energy_joules_total')
GROUP BY c.provider, c.region, c.stage, c.metric
ORDER BY c.provider, c.region, c.stage, c.metric
