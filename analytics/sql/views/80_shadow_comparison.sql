-- shadow_comparison: per session × shadow provider × shadow region, the shadow against
-- the primary over the same requests (rows of shadow_pairs). Latency deltas are over
-- pairs where both succeeded and both have the metric; error rates are over all pairs.
-- A p99 over fewer than 100 pairs is flagged (few_pairs), not to be read as exact.
-- Cost: list prices of both providers (providers table) and what the paired successful
-- requests cost at each, per 1M tokens (prompt + completion) — docs/analytics.md, Cost.
CREATE OR REPLACE VIEW shadow_comparison AS
WITH agg AS (
    SELECT
        run_id, shadow_provider, shadow_region,
        any_value(primary_provider)                                          AS primary_provider,
        count(*)                                                             AS pairs,
        count(*) FILTER (primary_status = 'ok' AND shadow_status = 'ok')     AS both_ok,
        avg((primary_status = 'error')::INTEGER)                             AS primary_error_rate,
        avg((shadow_status = 'error')::INTEGER)                              AS shadow_error_rate,
        count(ttft_delta_ms) FILTER (primary_status = 'ok' AND shadow_status = 'ok') AS ttft_n,
        median(ttft_delta_ms) FILTER (primary_status = 'ok' AND shadow_status = 'ok')
                                                                             AS ttft_delta_p50_ms,
        quantile_cont(ttft_delta_ms, 0.99) FILTER (primary_status = 'ok' AND shadow_status = 'ok')
                                                                             AS ttft_delta_p99_ms,
        avg((ttft_delta_ms < 0)::INTEGER) FILTER (primary_status = 'ok' AND shadow_status = 'ok')
                                                                             AS ttft_shadow_faster_share,
        median(primary_ttft_ms) FILTER (primary_status = 'ok' AND shadow_status = 'ok')
                                                                             AS primary_ttft_p50_ms,
        median(shadow_ttft_ms) FILTER (primary_status = 'ok' AND shadow_status = 'ok')
                                                                             AS shadow_ttft_p50_ms,
        count(e2e_delta_ms) FILTER (primary_status = 'ok' AND shadow_status = 'ok') AS e2e_n,
        median(e2e_delta_ms) FILTER (primary_status = 'ok' AND shadow_status = 'ok')
                                                                             AS e2e_delta_p50_ms,
        quantile_cont(e2e_delta_ms, 0.99) FILTER (primary_status = 'ok' AND shadow_status = 'ok')
                                                                             AS e2e_delta_p99_ms,
        avg((e2e_delta_ms < 0)::INTEGER) FILTER (primary_status = 'ok' AND shadow_status = 'ok')
                                                                             AS e2e_shadow_faster_share,
        median(primary_e2e_ms) FILTER (primary_status = 'ok' AND shadow_status = 'ok')
                                                                             AS primary_e2e_p50_ms,
        median(shadow_e2e_ms) FILTER (primary_status = 'ok' AND shadow_status = 'ok')
                                                                             AS shadow_e2e_p50_ms,
        avg(primary_completion_tokens) FILTER (primary_status = 'ok' AND shadow_status = 'ok')
                                                                             AS primary_completion_tokens_mean,
        avg(shadow_completion_tokens) FILTER (primary_status = 'ok' AND shadow_status = 'ok')
                                                                             AS shadow_completion_tokens_mean,
        median(completion_tokens_delta) FILTER (primary_status = 'ok' AND shadow_status = 'ok')
                                                                             AS completion_tokens_delta_p50,
        median(prompt_tokens_delta) FILTER (primary_status = 'ok' AND shadow_status = 'ok')
                                                                             AS prompt_tokens_delta_p50,
        sum(primary_prompt_tokens) FILTER (primary_status = 'ok' AND shadow_status = 'ok')
                                                                             AS primary_prompt_tokens,
        sum(primary_completion_tokens) FILTER (primary_status = 'ok' AND shadow_status = 'ok')
                                                                             AS primary_completion_tokens,
        sum(shadow_prompt_tokens) FILTER (primary_status = 'ok' AND shadow_status = 'ok')
                                                                             AS shadow_prompt_tokens,
        sum(shadow_completion_tokens) FILTER (primary_status = 'ok' AND shadow_status = 'ok')
                                                                             AS shadow_completion_tokens
    FROM shadow_pairs
    GROUP BY run_id, shadow_provider, shadow_region
)
SELECT
    a.run_id, a.primary_provider, a.shadow_provider, a.shadow_region,
    a.pairs, a.both_ok, a.pairs < 100                                        AS few_pairs,
    a.primary_error_rate, a.shadow_error_rate,
    a.ttft_n, a.primary_ttft_p50_ms, a.shadow_ttft_p50_ms,
    a.ttft_delta_p50_ms, a.ttft_delta_p99_ms, a.ttft_shadow_faster_share,
    a.e2e_n, a.primary_e2e_p50_ms, a.shadow_e2e_p50_ms,
    a.e2e_delta_p50_ms, a.e2e_delta_p99_ms, a.e2e_shadow_faster_share,
    a.primary_completion_tokens_mean, a.shadow_completion_tokens_mean,
    a.completion_tokens_delta_p50, a.prompt_tokens_delta_p50,
    pp.input_per_mtok                                                        AS primary_input_per_mtok,
    pp.output_per_mtok                                                       AS primary_output_per_mtok,
    sp.input_per_mtok                                                        AS shadow_input_per_mtok,
    sp.output_per_mtok                                                       AS shadow_output_per_mtok,
    blended_usd_per_mtok(a.primary_prompt_tokens, a.primary_completion_tokens,
                         pp.input_per_mtok, pp.output_per_mtok)              AS primary_usd_per_mtok,
    blended_usd_per_mtok(a.shadow_prompt_tokens, a.shadow_completion_tokens,
                         sp.input_per_mtok, sp.output_per_mtok)              AS shadow_usd_per_mtok,
    list_cost_usd(a.primary_prompt_tokens, a.primary_completion_tokens,
                  pp.input_per_mtok, pp.output_per_mtok)                     AS primary_cost_usd,
    list_cost_usd(a.shadow_prompt_tokens, a.shadow_completion_tokens,
                  sp.input_per_mtok, sp.output_per_mtok)                     AS shadow_cost_usd
FROM agg AS a
LEFT JOIN providers AS pp ON pp.run_id = a.run_id AND pp.provider = a.primary_provider
LEFT JOIN providers AS sp ON sp.run_id = a.run_id AND sp.provider = a.shadow_provider;
