-- The report's per stage x provider x region rows of one run, from the shards' stored
-- pre-aggregates (schema_v3.sql) instead of the raw records: every `stage_summary`
-- column except the percentiles, which analytics/stats/sketch.py reads from the stored
-- histograms. The rates, attainment and cost are the view's macros (sql/macros.sql).
-- Parameters: $run_id.
WITH m AS (
    -- The stage's level from the plan (schema_v7.sql); the stored aggregate's
    -- concurrency is the part's share the records carry.
    SELECT m.* REPLACE (s.stage_concurrency AS concurrency), s.concurrency AS part_concurrency
    FROM shard_summaries AS m
    JOIN shards AS s
      ON s.run_id = m.run_id AND s.shard_id = m.shard_id AND s.accepted_attempt = m.attempt
    WHERE m.run_id = $run_id
),
g AS (
    SELECT
        run_id, stage, provider, region,
        max(concurrency)                                        AS concurrency,
        max(part_concurrency)                                   AS part_concurrency,
        -- A stage has one load kind, so its shards' lists are equal.
        string_agg(DISTINCT load_kinds, ',' ORDER BY load_kinds) AS load_kind,
        sum(requests)                                           AS requests,
        sum(ok)                                                 AS ok,
        sum(errors)                                             AS errors,
        sum(ttft_n) AS ttft_n, sum(tpot_n) AS tpot_n, sum(e2e_n) AS e2e_n,
        sum(ttft_intent_n) AS ttft_intent_n, sum(e2e_intent_n) AS e2e_intent_n,
        sum(decode_sum) / nullif(sum(decode_n), 0)              AS decode_tok_s_mean,
        -- A shard with successful requests but no input sum had unknown prompt counts.
        CASE WHEN NOT bool_or(coalesce(ok, 0) > 0 AND input_tokens IS NULL)
             THEN sum(input_tokens) END                         AS input_tokens,
        sum(output_tokens)                                      AS output_tokens,
        sum(cached_tokens)                                      AS cached_tokens,
        bool_or(has_slo)                                        AS has_slo,
        sum(met_slo)                                            AS met_slo,
        bool_and(steady)                                        AS steady_window,
        sum(window_us) / 1e6                                    AS window_s,
        sum(span_us) / 1e6                                      AS span_s,
        sum(per_window_s(done, window_us))                      AS attempted_request_rate,
        sum(per_window_s(ok_done, window_us))                   AS ok_request_rate,
        sum(per_window_s(good_done, window_us))                 AS goodput_rps,
        CASE WHEN NOT bool_or(coalesce(ok_done, 0) > 0 AND in_tokens_done IS NULL)
             THEN sum(per_window_s(in_tokens_done, window_us)) END AS input_tok_s,
        sum(per_window_s(out_tokens_done, window_us))           AS output_tok_s,
        sum(mean_in_flight(busy_us, window_us))                 AS achieved_concurrency
    FROM m
    GROUP BY run_id, stage, provider, region
),
errs AS (
    SELECT stage, provider, region,
           string_agg(error_class || '=' || n, ', ' ORDER BY error_class) AS errors_by_class
    FROM (SELECT m.stage, m.provider, m.region, e.error_class, sum(e.n) AS n
          FROM m JOIN shard_errors AS e USING (run_id, shard_id)
          GROUP BY ALL)
    GROUP BY ALL
)
SELECT
    g.run_id, g.stage, g.provider, g.region, g.load_kind, g.concurrency, g.part_concurrency,
    g.requests, g.ok, g.errors,
    g.errors / g.requests::DOUBLE                                  AS error_rate,
    coalesce(e.errors_by_class, '')                                AS errors_by_class,
    g.ok_request_rate AS request_rate, g.attempted_request_rate,
    g.achieved_concurrency, g.window_s, g.span_s, g.steady_window,
    g.ttft_n, g.tpot_n, g.e2e_n, g.ttft_intent_n, g.e2e_intent_n,
    g.decode_tok_s_mean,
    g.input_tokens, g.output_tokens, g.input_tok_s, g.output_tok_s,
    goodput_rps(g.has_slo, g.goodput_rps)                          AS goodput_rps,
    slo_attainment_pct(g.has_slo, g.met_slo, g.requests)           AS slo_attainment_pct,
    unnest(stage_costs(effective_input_per_mtok(p.input_per_mtok, p.cached_input_per_mtok,
                                                g.input_tokens, g.cached_tokens),
                       p.output_per_mtok, p.gpu_hour_usd, p.gpus,
                       g.input_tokens, g.output_tokens, g.ok, g.ok_request_rate,
                       g.input_tok_s, g.output_tok_s, g.span_s))
FROM g
LEFT JOIN errs AS e USING (stage, provider, region)
LEFT JOIN providers AS p USING (run_id, provider)
ORDER BY g.provider, g.stage, g.region
