-- Per run x stage x provider x region, as the records measure it: `concurrency` is what
-- they carry, a part's share (`stage_summary` adds the stage's level). Percentiles:
-- quantile_cont (numpy's default linear interpolation) over successful requests; ITL over
-- every gap of successful requests. Means and standard deviations over the same samples;
-- the standard deviation is the population one (stddev_pop: numpy's np.std default, which
-- vLLM's benchmark reports), so the figures compare like for like. Intent-based latencies only for open-loop load (closed
-- loop has no arrival schedule). Throughput, request rate and concurrency are measured per
-- shard in its steady-state window [first send, last send] over the requests that
-- complete inside it (after the last send no new request starts, so the drain, or
-- cool-down, is excluded); `request_rate`, tok/s and goodput count successful requests
-- only (a server that refuses every connection at once serves nothing, however fast),
-- `attempted_request_rate` every request that ended. Input tokens and their rate are
-- NULL (unknown) when some successful request has no prompt count. A shard too short for that window
-- falls back to its whole span [first send, last end]. A shard runs in one process,
-- whose wall-clock instants come from one perf_counter anchor, so their differences are
-- perf durations. The steady window, SLO
-- and cost formulas are macros (sql/macros.sql), shared with the stored aggregates.
CREATE OR REPLACE VIEW stage_summary_measured AS
WITH req AS (
    SELECT
        r.*,
        epoch_us(r.sent_at)                              AS sent_us,
        epoch_us(coalesce(r.end_at, r.sent_at))          AS end_us,
        slo_defined(s.ttft_ms, s.tpot_ms, s.e2e_ms)     AS has_slo,
        slo_met(r.status, r.load_kind, r.ttft_ms, r.ttft_from_intent_ms, r.tpot_ms, r.e2e_ms,
                r.e2e_from_intent_ms, s.ttft_ms, s.tpot_ms, s.e2e_ms) AS met_slo
    FROM requests AS r
    LEFT JOIN slos AS s ON s.run_id = r.run_id
),
shard_window AS (
    SELECT run_id, shard_id,
           min(sent_us)                                                AS w_start,
           steady_window_end_us(count(*), any_value(concurrency), min(sent_us), max(sent_us),
                                max(end_us))                           AS w_end,
           steady_window(count(*), any_value(concurrency), min(sent_us), max(sent_us)) AS steady,
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
        count(*) FILTER (in_window(q.end_us, w.w_start, w.w_end))      AS done,
        count(*) FILTER (q.status = 'ok' AND in_window(q.end_us, w.w_start, w.w_end)) AS ok_done,
        count(*) FILTER (q.met_slo AND in_window(q.end_us, w.w_start, w.w_end))       AS good_done,
        -- NULL when a successful request's prompt count is unknown: a partial sum
        -- would understate the rate (docs/metrics.md, "Token counts").
        CASE WHEN count(*) FILTER (q.status = 'ok' AND q.prompt_tokens IS NULL
                                   AND in_window(q.end_us, w.w_start, w.w_end)) = 0
             THEN sum(q.prompt_tokens) FILTER (q.status = 'ok'
                                               AND in_window(q.end_us, w.w_start, w.w_end))
        END                                                            AS in_tokens,
        sum(q.completion_tokens) FILTER (q.status = 'ok'
                                         AND in_window(q.end_us, w.w_start, w.w_end))
                                                                       AS out_tokens,
        sum(busy_in_window_us(q.sent_us, q.end_us, w.w_start, w.w_end)) AS busy_us
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
        sum(per_window_s(done, window_us))              AS attempted_request_rate,
        sum(per_window_s(ok_done, window_us))           AS ok_request_rate,
        sum(per_window_s(good_done, window_us))         AS goodput_rps,
        CASE WHEN NOT bool_or(ok_done > 0 AND in_tokens IS NULL)
             THEN sum(per_window_s(in_tokens, window_us)) END AS input_tok_s,
        sum(per_window_s(out_tokens, window_us))        AS output_tok_s,
        sum(mean_in_flight(busy_us, window_us))         AS achieved_concurrency
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
        avg(ttft_ms) FILTER (status = 'ok')                                     AS ttft_mean_ms,
        stddev_pop(ttft_ms) FILTER (status = 'ok')                              AS ttft_std_ms,
        avg(tpot_ms) FILTER (status = 'ok')                                     AS tpot_mean_ms,
        stddev_pop(tpot_ms) FILTER (status = 'ok')                              AS tpot_std_ms,
        avg(e2e_ms) FILTER (status = 'ok')                                      AS e2e_mean_ms,
        stddev_pop(e2e_ms) FILTER (status = 'ok')                               AS e2e_std_ms,
        avg(ttft_from_intent_ms) FILTER (status = 'ok' AND load_kind = 'open')
                                                                    AS ttft_intent_mean_ms,
        stddev_pop(ttft_from_intent_ms) FILTER (status = 'ok' AND load_kind = 'open')
                                                                    AS ttft_intent_std_ms,
        avg(e2e_from_intent_ms) FILTER (status = 'ok' AND load_kind = 'open')
                                                                    AS e2e_intent_mean_ms,
        stddev_pop(e2e_from_intent_ms) FILTER (status = 'ok' AND load_kind = 'open')
                                                                    AS e2e_intent_std_ms,
        quantile_cont(decode_tok_s, 0.5) FILTER (status = 'ok')                 AS decode_tok_s_p50,
        avg(decode_tok_s) FILTER (status = 'ok')                                AS decode_tok_s_mean,
        CASE WHEN count(*) FILTER (status = 'ok' AND prompt_tokens IS NULL) = 0
             THEN sum(prompt_tokens) FILTER (status = 'ok') END                 AS input_tokens,
        sum(completion_tokens) FILTER (status = 'ok')                           AS output_tokens,
        sum(cached_tokens) FILTER (status = 'ok')                               AS cached_tokens
    FROM req
    GROUP BY run_id, stage, provider, region
),
itl AS (
    SELECT run_id, stage, provider, region,
           count(itl_ms)                                                 AS itl_n,
           quantile_cont(itl_ms, [0.5, 0.9, 0.95, 0.99, 0.999])          AS itl_q,
           avg(itl_ms)                                                   AS itl_mean_ms,
           stddev_pop(itl_ms)                                            AS itl_std_ms
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
    r.ok_request_rate AS request_rate, r.attempted_request_rate,
    r.achieved_concurrency, r.window_s, r.span_s, r.steady_window,
    l.ttft_n, l.ttft_q[1] AS ttft_p50_ms, l.ttft_q[2] AS ttft_p90_ms, l.ttft_q[3] AS ttft_p95_ms,
    l.ttft_q[4] AS ttft_p99_ms, l.ttft_q[5] AS ttft_p999_ms, l.ttft_mean_ms, l.ttft_std_ms,
    coalesce(i.itl_n, 0) AS itl_n, i.itl_q[1] AS itl_p50_ms, i.itl_q[2] AS itl_p90_ms,
    i.itl_q[3] AS itl_p95_ms, i.itl_q[4] AS itl_p99_ms, i.itl_q[5] AS itl_p999_ms,
    i.itl_mean_ms, i.itl_std_ms,
    l.tpot_n, l.tpot_q[1] AS tpot_p50_ms, l.tpot_q[2] AS tpot_p90_ms, l.tpot_q[3] AS tpot_p95_ms,
    l.tpot_q[4] AS tpot_p99_ms, l.tpot_q[5] AS tpot_p999_ms, l.tpot_mean_ms, l.tpot_std_ms,
    l.e2e_n, l.e2e_q[1] AS e2e_p50_ms, l.e2e_q[2] AS e2e_p90_ms, l.e2e_q[3] AS e2e_p95_ms,
    l.e2e_q[4] AS e2e_p99_ms, l.e2e_q[5] AS e2e_p999_ms, l.e2e_mean_ms, l.e2e_std_ms,
    l.ttft_intent_n, l.ttft_intent_q[1] AS ttft_intent_p50_ms,
    l.ttft_intent_q[2] AS ttft_intent_p90_ms, l.ttft_intent_q[3] AS ttft_intent_p95_ms,
    l.ttft_intent_q[4] AS ttft_intent_p99_ms, l.ttft_intent_q[5] AS ttft_intent_p999_ms,
    l.ttft_intent_mean_ms, l.ttft_intent_std_ms,
    l.e2e_intent_n, l.e2e_intent_q[1] AS e2e_intent_p50_ms,
    l.e2e_intent_q[2] AS e2e_intent_p90_ms, l.e2e_intent_q[3] AS e2e_intent_p95_ms,
    l.e2e_intent_q[4] AS e2e_intent_p99_ms, l.e2e_intent_q[5] AS e2e_intent_p999_ms,
    l.e2e_intent_mean_ms, l.e2e_intent_std_ms,
    l.decode_tok_s_p50, l.decode_tok_s_mean,
    l.input_tokens, l.output_tokens, r.input_tok_s, r.output_tok_s,
    goodput_rps(a.has_slo, r.goodput_rps)                          AS goodput_rps,
    slo_attainment_pct(a.has_slo, a.met_slo, l.requests)           AS slo_attainment_pct,
    unnest(stage_costs(effective_input_per_mtok(p.input_per_mtok, p.cached_input_per_mtok,
                                                l.input_tokens, l.cached_tokens),
                       p.output_per_mtok, p.gpu_hour_usd, p.gpus,
                       l.input_tokens, l.output_tokens, l.ok, r.ok_request_rate,
                       r.input_tok_s, r.output_tok_s, r.span_s))
FROM lat AS l
LEFT JOIN itl AS i USING (run_id, stage, provider, region)
LEFT JOIN errs AS e USING (run_id, stage, provider, region)
LEFT JOIN rates AS r USING (run_id, stage, provider, region)
LEFT JOIN attainment AS a USING (run_id, stage, provider, region)
LEFT JOIN providers AS p USING (run_id, provider);
