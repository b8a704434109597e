-- Per run x stage x provider x region, as the records measure it: `concurrency` is what
-- they carry, a part's share (`stage_summary` adds the stage's level). Percentiles:
-- quantile_cont (numpy's default linear interpolation) over successful requests; ITL over
-- every gap of successful requests. Intent-based latencies only for open-loop load (closed
-- loop has no arrival schedule). Throughput, request rate and concurrency are measured per
-- shard in its steady-state window [first send, last send] over the requests that
-- complete inside it: after the last send no new request starts, so the drain (cool-down)
-- is excluded. A shard too short for that window falls back to its whole span [first
-- send, last end]. A shard runs in one process, whose wall-clock instants come from one
-- perf_counter anchor, so their differences are perf durations.
CREATE OR REPLACE VIEW stage_summary_measured AS
WITH req AS (
    SELECT
        r.*,
        epoch_us(r.sent_at)                              AS sent_us,
        epoch_us(coalesce(r.end_at, r.sent_at))          AS end_us,
        s.run_id IS NOT NULL
            AND (s.ttft_ms IS NOT NULL OR s.tpot_ms IS NOT NULL OR s.e2e_ms IS NOT NULL)
                                                         AS has_slo,
        -- Open loop is judged from intent: it includes the queueing a user would see.
        -- A one-token answer has no TPOT and cannot miss a TPOT objective.
        r.status = 'ok'
        AND (s.ttft_ms IS NULL OR (CASE WHEN r.load_kind = 'open'
                                       THEN r.ttft_from_intent_ms ELSE r.ttft_ms END) <= s.ttft_ms)
        AND (s.tpot_ms IS NULL OR coalesce(r.tpot_ms <= s.tpot_ms, true))
        AND (s.e2e_ms IS NULL OR (CASE WHEN r.load_kind = 'open'
                                      THEN r.e2e_from_intent_ms ELSE r.e2e_ms END) <= s.e2e_ms)
                                                         AS met_slo
    FROM requests AS r
    LEFT JOIN slos AS s ON s.run_id = r.run_id
),
-- The steady window needs n >= 2c + 1 requests: then at least c + 1 of them complete
-- before the last send, whatever the ramp-up.
shard_window AS (
    SELECT run_id, shard_id,
           min(sent_us)                                                AS w_start,
           CASE WHEN count(*) >= 2 * any_value(concurrency) + 1 AND max(sent_us) > min(sent_us)
                THEN max(sent_us) ELSE max(end_us) END                 AS w_end,
           count(*) >= 2 * any_value(concurrency) + 1 AND max(sent_us) > min(sent_us) AS steady,
           max(end_us) - min(sent_us)                                  AS span_us
    FROM req
    GROUP BY run_id, shard_id
),
shard_rates AS (
    SELECT
        q.run_id, q.stage, q.provider, q.region, q.shard_id,
        any_value(w.steady)                                            AS steady,
        any_value(w.w_end - w.w_start)                                 AS window_us,
        any_value(w.span_us)                                           AS span_us,
        count(*) FILTER (q.end_us BETWEEN w.w_start AND w.w_end)       AS done,
        count(*) FILTER (q.status = 'ok' AND q.end_us BETWEEN w.w_start AND w.w_end) AS ok_done,
        count(*) FILTER (q.met_slo AND q.end_us BETWEEN w.w_start AND w.w_end)       AS good_done,
        sum(q.prompt_tokens) FILTER (q.status = 'ok' AND q.end_us BETWEEN w.w_start AND w.w_end)
                                                                       AS in_tokens,
        sum(q.completion_tokens) FILTER (q.status = 'ok' AND q.end_us BETWEEN w.w_start AND w.w_end)
                                                                       AS out_tokens,
        -- Little's law: mean requests in flight = time in flight inside the window / window.
        sum(greatest(0, least(q.end_us, w.w_end) - greatest(q.sent_us, w.w_start)))
                                                                       AS busy_us
    FROM req AS q
    JOIN shard_window AS w USING (run_id, shard_id)
    GROUP BY q.run_id, q.stage, q.provider, q.region, q.shard_id
),
rates AS (
    SELECT
        run_id, stage, provider, region,
        bool_and(steady)                                AS steady_window,
        sum(window_us) / 1e6                            AS window_s,
        sum(span_us) / 1e6                              AS span_s,
        sum(done * 1e6 / nullif(window_us, 0))          AS request_rate,
        sum(ok_done * 1e6 / nullif(window_us, 0))       AS ok_request_rate,
        sum(good_done * 1e6 / nullif(window_us, 0))     AS goodput_rps,
        sum(in_tokens * 1e6 / nullif(window_us, 0))     AS input_tok_s,
        sum(out_tokens * 1e6 / nullif(window_us, 0))    AS output_tok_s,
        sum(busy_us / nullif(window_us, 0))             AS achieved_concurrency
    FROM shard_rates
    GROUP BY run_id, stage, provider, region
),
lat AS (
    SELECT
        run_id, stage, provider, region,
        any_value(concurrency)                                                  AS concurrency,
        string_agg(DISTINCT load_kind, ',' ORDER BY load_kind)                  AS load_kind,
        count(*)                                                                AS requests,
        count(*) FILTER (status = 'ok')                                         AS ok,
        count(*) FILTER (status = 'error')                                      AS errors,
        count(ttft_ms) FILTER (status = 'ok')                                   AS ttft_n,
        count(tpot_ms) FILTER (status = 'ok')                                   AS tpot_n,
        count(e2e_ms) FILTER (status = 'ok')                                    AS e2e_n,
        count(ttft_from_intent_ms) FILTER (status = 'ok' AND load_kind = 'open') AS ttft_intent_n,
        count(e2e_from_intent_ms) FILTER (status = 'ok' AND load_kind = 'open')  AS e2e_intent_n,
        quantile_cont(ttft_ms, [0.5, 0.9, 0.95, 0.99, 0.999]) FILTER (status = 'ok') AS ttft_q,
        quantile_cont(tpot_ms, [0.5, 0.9, 0.95, 0.99, 0.999]) FILTER (status = 'ok') AS tpot_q,
        quantile_cont(e2e_ms, [0.5, 0.9, 0.95, 0.99, 0.999]) FILTER (status = 'ok')  AS e2e_q,
        quantile_cont(ttft_from_intent_ms, [0.5, 0.9, 0.95, 0.99, 0.999])
            FILTER (status = 'ok' AND load_kind = 'open')                       AS ttft_intent_q,
        quantile_cont(e2e_from_intent_ms, [0.5, 0.9, 0.95, 0.99, 0.999])
            FILTER (status = 'ok' AND load_kind = 'open')                       AS e2e_intent_q,
        quantile_cont(decode_tok_s, 0.5) FILTER (status = 'ok')                 AS decode_tok_s_p50,
        avg(decode_tok_s) FILTER (status = 'ok')                                AS decode_tok_s_mean,
        sum(prompt_tokens) FILTER (status = 'ok')                               AS input_tokens,
        sum(completion_tokens) FILTER (status = 'ok')                           AS output_tokens
    FROM req
    GROUP BY run_id, stage, provider, region
),
itl AS (
    SELECT run_id, stage, provider, region,
           count(itl_ms)                                                 AS itl_n,
           quantile_cont(itl_ms, [0.5, 0.9, 0.95, 0.99, 0.999])          AS itl_q
    FROM token_gaps
    GROUP BY run_id, stage, provider, region
),
error_counts AS (
    SELECT run_id, stage, provider, region, error_class, count(*) AS n
    FROM req
    WHERE status = 'error'
    GROUP BY ALL
),
errs AS (
    SELECT run_id, stage, provider, region,
           string_agg(error_class || '=' || n, ', ' ORDER BY error_class) AS errors_by_class
    FROM error_counts
    GROUP BY ALL
),
attainment AS (
    SELECT run_id, stage, provider, region,
           bool_or(has_slo)                                     AS has_slo,
           count(*) FILTER (met_slo)                            AS met_slo
    FROM req
    GROUP BY ALL
)
SELECT
    l.run_id, l.stage, l.provider, l.region, l.load_kind, l.concurrency,
    l.requests, l.ok, l.errors,
    l.errors / l.requests::DOUBLE                                  AS error_rate,
    coalesce(e.errors_by_class, '')                                AS errors_by_class,
    r.request_rate, r.achieved_concurrency, r.window_s, r.span_s, r.steady_window,
    l.ttft_n, l.ttft_q[1] AS ttft_p50_ms, l.ttft_q[2] AS ttft_p90_ms, l.ttft_q[3] AS ttft_p95_ms,
    l.ttft_q[4] AS ttft_p99_ms, l.ttft_q[5] AS ttft_p999_ms,
    coalesce(i.itl_n, 0) AS itl_n, i.itl_q[1] AS itl_p50_ms, i.itl_q[2] AS itl_p90_ms,
    i.itl_q[3] AS itl_p95_ms, i.itl_q[4] AS itl_p99_ms, i.itl_q[5] AS itl_p999_ms,
    l.tpot_n, l.tpot_q[1] AS tpot_p50_ms, l.tpot_q[2] AS tpot_p90_ms, l.tpot_q[3] AS tpot_p95_ms,
    l.tpot_q[4] AS tpot_p99_ms, l.tpot_q[5] AS tpot_p999_ms,
    l.e2e_n, l.e2e_q[1] AS e2e_p50_ms, l.e2e_q[2] AS e2e_p90_ms, l.e2e_q[3] AS e2e_p95_ms,
    l.e2e_q[4] AS e2e_p99_ms, l.e2e_q[5] AS e2e_p999_ms,
    l.ttft_intent_n, l.ttft_intent_q[1] AS ttft_intent_p50_ms,
    l.ttft_intent_q[2] AS ttft_intent_p90_ms, l.ttft_intent_q[3] AS ttft_intent_p95_ms,
    l.ttft_intent_q[4] AS ttft_intent_p99_ms, l.ttft_intent_q[5] AS ttft_intent_p999_ms,
    l.e2e_intent_n, l.e2e_intent_q[1] AS e2e_intent_p50_ms,
    l.e2e_intent_q[2] AS e2e_intent_p90_ms, l.e2e_intent_q[3] AS e2e_intent_p95_ms,
    l.e2e_intent_q[4] AS e2e_intent_p99_ms, l.e2e_intent_q[5] AS e2e_intent_p999_ms,
    l.decode_tok_s_p50, l.decode_tok_s_mean,
    l.input_tokens, l.output_tokens, r.input_tok_s, r.output_tok_s,
    CASE WHEN a.has_slo THEN r.goodput_rps END                     AS goodput_rps,
    CASE WHEN a.has_slo THEN 100.0 * a.met_slo / l.requests END    AS slo_attainment_pct,
    -- Cost (docs/analytics.md). Pricing wins when given (it is what the user is billed);
    -- otherwise GPU-hours of the deployment over the throughput measured at this load.
    CASE WHEN p.input_per_mtok IS NOT NULL THEN 'api'
         WHEN p.gpu_hour_usd IS NOT NULL AND p.gpus IS NOT NULL THEN 'gpu_hour' END AS cost_basis,
    p.gpu_hour_usd * p.gpus                                        AS deployment_usd_per_hour,
    CASE WHEN p.input_per_mtok IS NOT NULL THEN p.input_per_mtok
         ELSE p.gpu_hour_usd * p.gpus / (r.input_tok_s * 3600) * 1e6 END  AS cost_per_mtok_input,
    CASE WHEN p.input_per_mtok IS NOT NULL THEN p.output_per_mtok
         ELSE p.gpu_hour_usd * p.gpus / (r.output_tok_s * 3600) * 1e6 END AS cost_per_mtok_output,
    CASE WHEN p.input_per_mtok IS NOT NULL
         THEN (l.input_tokens * p.input_per_mtok + l.output_tokens * p.output_per_mtok)
              / 1e6 / nullif(l.ok, 0) * 1000
         ELSE p.gpu_hour_usd * p.gpus / (r.ok_request_rate * 3600) * 1000 END
                                                                   AS cost_per_1k_requests,
    CASE WHEN p.input_per_mtok IS NOT NULL
         THEN (l.input_tokens * p.input_per_mtok + l.output_tokens * p.output_per_mtok) / 1e6
         ELSE p.gpu_hour_usd * p.gpus * r.span_s / 3600 END        AS cost_usd
FROM lat AS l
LEFT JOIN itl AS i USING (run_id, stage, provider, region)
LEFT JOIN errs AS e USING (run_id, stage, provider, region)
LEFT JOIN rates AS r USING (run_id, stage, provider, region)
LEFT JOIN attainment AS a USING (run_id, stage, provider, region)
LEFT JOIN providers AS p USING (run_id, provider);
