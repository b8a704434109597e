-- Per provider × region × stage of one run, what the server's own metrics say
-- (docs/metrics.md, "Server-observed prefix cache, speculative decoding and energy"):
--   * the prefix-cache hit rate: hits / queries of the counters' increases over the
--     stage, else the engine's hit-rate gauge averaged over the stage's span;
--   * speculative decoding: draft acceptance rate (accepted / draft tokens) and mean
--     accepted length (1 + accepted / drafts: the bonus token included, as vLLM logs it),
--     else the engine's gauges averaged;
--   * GPU energy over the stage's steady window: the energy counter's increase when the
--     exporter has one, else the power gauge integrated (trapezoids between scrapes),
--     summed over GPUs and scraped series, over the output tokens of the successful
--     requests that ended in that window.
-- Only the scrapes of each shard's accepted attempt count (its records are the stage's).
-- A counter's increase between consecutive scrapes of one series is its difference; a
-- drop is a reset (the server restarted), after which the counter counts again from
-- zero, so that interval adds the value after it (as Prometheus' increase() does). A
-- failed scrape has no samples: the interval runs from the last good scrape to the next.
-- Unknown (NULL) where the metrics are absent, never zero. Parameters: $run_id.
WITH series AS (
    SELECT c.stage, c.provider, c.region, c.shard_id, c.attempt, c.scrape_seq,
           epoch_us(c.scraped_at) AS t, c.metric, c.value
    FROM server_metrics_canonical AS c
    JOIN shards AS s
      ON s.run_id = c.run_id AND s.shard_id = c.shard_id AND s.accepted_attempt = c.attempt
    WHERE c.run_id = $run_id
      AND c.metric IN ('prefix_cache_queries_total', 'prefix_cache_hits_total',
                       'prefix_cache_hit_rate', 'spec_drafts_total', 'spec_draft_tokens_total',
                       'spec_accepted_tokens_total', 'spec_accept_rate', 'spec_accept_length',
                       'gpu_power_watts', 'gpu_energy_joules_total')
),
steps AS (
    SELECT *,
           lag(value) OVER w AS previous,
           lag(t) OVER w     AS previous_t
    FROM series
    WINDOW w AS (PARTITION BY shard_id, attempt, metric ORDER BY scrape_seq)
),
increases AS (
    SELECT stage, provider, region, metric,
           sum(CASE WHEN value >= previous THEN value - previous ELSE value END) AS increase
    FROM steps
    WHERE previous IS NOT NULL
      AND metric IN ('prefix_cache_queries_total', 'prefix_cache_hits_total',
                     'spec_drafts_total', 'spec_draft_tokens_total', 'spec_accepted_tokens_total')
    GROUP BY stage, provider, region, metric
),
counters AS (
    SELECT stage, provider, region,
           any_value(increase) FILTER (metric = 'prefix_cache_queries_total') AS queries,
           any_value(increase) FILTER (metric = 'prefix_cache_hits_total')    AS hits,
           any_value(increase) FILTER (metric = 'spec_drafts_total')          AS drafts,
           any_value(increase) FILTER (metric = 'spec_draft_tokens_total')    AS draft_tokens,
           any_value(increase) FILTER (metric = 'spec_accepted_tokens_total') AS accepted
    FROM increases
    GROUP BY stage, provider, region
),
req AS (
    SELECT stage, provider, region, shard_id, concurrency, status, completion_tokens,
           epoch_us(sent_at)                     AS sent_us,
           epoch_us(coalesce(end_at, sent_at))   AS end_us
    FROM requests
    WHERE run_id = $run_id AND sent_at IS NOT NULL
),
-- Gauges: averaged over the scrapes taken while the stage's requests were in flight (its
-- first send to its last end), as the telemetry summary does.
gauges AS (
    SELECT g.stage, g.provider, g.region,
           avg(g.value) FILTER (g.metric = 'prefix_cache_hit_rate') AS hit_rate,
           avg(g.value) FILTER (g.metric = 'spec_accept_rate')      AS accept_rate,
           avg(g.value) FILTER (g.metric = 'spec_accept_length')    AS accept_length
    FROM series AS g
    JOIN (SELECT stage, provider, region, min(sent_us) AS first_us, max(end_us) AS last_us
          FROM req GROUP BY stage, provider, region) AS span
      USING (stage, provider, region)
    WHERE g.metric IN ('prefix_cache_hit_rate', 'spec_accept_rate', 'spec_accept_length')
      AND g.t BETWEEN span.first_us AND span.last_us
    GROUP BY g.stage, g.provider, g.region
),
-- The stage's steady window: every shard of the stage in its own (sql/macros.sql) ...
shard_window AS (
    SELECT stage, provider, region, shard_id,
           min(sent_us) AS w_start,
           steady_window_end_us(count(*), any_value(concurrency), min(sent_us), max(sent_us),
                                max(end_us)) AS w_end
    FROM req
    GROUP BY stage, provider, region, shard_id
),
steady AS (
    SELECT stage, provider, region, max(w_start) AS a, min(w_end) AS b
    FROM shard_window
    GROUP BY stage, provider, region
),
-- ... and every power series scraped throughout it. A series' energy comes from its
-- energy counter when it has one, else from its power gauge.
power_series AS (
    SELECT stage, provider, region, shard_id, attempt,
           CASE WHEN count(*) FILTER (metric = 'gpu_energy_joules_total') >= 2
                THEN 'gpu_energy_joules_total' ELSE 'gpu_power_watts' END AS source,
           min(t) AS first_t,
           max(t) AS last_t
    FROM series
    WHERE metric IN ('gpu_power_watts', 'gpu_energy_joules_total')
    GROUP BY stage, provider, region, shard_id, attempt
),
energy_window AS (
    SELECT s.stage, s.provider, s.region,
           greatest(s.a, max(p.first_t)) AS a,
           least(s.b, min(p.last_t))     AS b,
           string_agg(DISTINCT p.source, ', ' ORDER BY p.source) AS source
    FROM steady AS s
    JOIN power_series AS p USING (stage, provider, region)
    GROUP BY s.stage, s.provider, s.region, s.a, s.b
    HAVING least(s.b, min(p.last_t)) > greatest(s.a, max(p.first_t))
),
-- Each interval between consecutive scrapes of a power series, clipped to the window
-- [x0, x1]: the gauge's linear interpolation integrated (its value at the midpoint times
-- the width), or the counter's increase prorated to the part inside the window.
pieces AS (
    SELECT st.stage, st.provider, st.region,
           CASE WHEN st.metric = 'gpu_power_watts'
                THEN (st.previous + (st.value - st.previous)
                        * ((greatest(st.previous_t, w.a) + least(st.t, w.b)) / 2 - st.previous_t)
                        / (st.t - st.previous_t))
                     * (least(st.t, w.b) - greatest(st.previous_t, w.a)) / 1e6
                ELSE (CASE WHEN st.value >= st.previous THEN st.value - st.previous
                           ELSE st.value END)
                     * (least(st.t, w.b) - greatest(st.previous_t, w.a)) / (st.t - st.previous_t)
           END AS joules
    FROM steps AS st
    JOIN power_series AS p USING (stage, provider, region, shard_id, attempt)
    JOIN energy_window AS w USING (stage, provider, region)
    WHERE st.metric = p.source
      AND st.previous IS NOT NULL
      AND st.t > st.previous_t
      AND least(st.t, w.b) > greatest(st.previous_t, w.a)
),
energy AS (
    SELECT w.stage, w.provider, w.region, w.source,
           (w.b - w.a) / 1e6 AS window_s,
           (SELECT sum(joules) FROM pieces AS p
            WHERE p.stage = w.stage AND p.provider = w.provider AND p.region = w.region)
               AS joules,
           sum(r.completion_tokens) FILTER (r.status = 'ok' AND in_window(r.end_us, w.a, w.b))
               AS out_tokens,
           count(*) FILTER (r.status = 'ok' AND in_window(r.end_us, w.a, w.b)
                            AND r.completion_tokens IS NULL) AS unknown_tokens
    FROM energy_window AS w
    JOIN req AS r USING (stage, provider, region)
    GROUP BY w.stage, w.provider, w.region, w.source, w.a, w.b
),
scraped AS (
    SELECT DISTINCT stage, provider, region
    FROM server_metric_scrapes
    WHERE run_id = $run_id
)
SELECT k.provider, k.region, k.stage,
       c.queries                                                   AS prefix_cache_queried_tokens,
       c.hits                                                      AS prefix_cache_hit_tokens,
       coalesce(c.hits / nullif(c.queries, 0), g.hit_rate)         AS server_prefix_cache_hit_rate,
       c.drafts                                                    AS spec_drafts,
       c.draft_tokens                                              AS spec_draft_tokens,
       c.accepted                                                  AS spec_accepted_tokens,
       coalesce(c.accepted / nullif(c.draft_tokens, 0), g.accept_rate)
                                                                   AS spec_acceptance_rate,
       coalesce(1 + c.accepted / nullif(c.drafts, 0), g.accept_length)
                                                                   AS spec_mean_accepted_length,
       e.source                                                    AS energy_source,
       e.window_s                                                  AS energy_window_s,
       e.joules                                                    AS gpu_energy_j,
       e.joules / nullif(e.window_s, 0)                            AS mean_gpu_power_w,
       CASE WHEN e.unknown_tokens = 0 THEN e.out_tokens END        AS output_tokens_in_window,
       CASE WHEN e.unknown_tokens = 0 THEN e.joules / nullif(e.out_tokens, 0) END
                                                                   AS joules_per_output_token
FROM scraped AS k
LEFT JOIN counters AS c USING (stage, provider, region)
LEFT JOIN gauges AS g USING (stage, provider, region)
LEFT JOIN energy AS e USING (stage, provider, region)
ORDER BY k.provider, k.region, k.stage
