-- Every pair of providers measured in the same run, stage and region: point ratios of
-- their percentiles (b / a) and of their cost. Confidence intervals on these ratios are
-- in the report (`tokenbench report --providers A,B`), which bootstraps them.
CREATE OR REPLACE VIEW provider_comparison AS
SELECT
    a.run_id, a.stage, a.region,
    a.provider AS provider_a, b.provider AS provider_b,
    a.ttft_p50_ms AS a_ttft_p50_ms, b.ttft_p50_ms AS b_ttft_p50_ms,
    b.ttft_p50_ms / nullif(a.ttft_p50_ms, 0) AS ttft_p50_ratio,
    a.ttft_p99_ms AS a_ttft_p99_ms, b.ttft_p99_ms AS b_ttft_p99_ms,
    b.ttft_p99_ms / nullif(a.ttft_p99_ms, 0) AS ttft_p99_ratio,
    b.tpot_p50_ms / nullif(a.tpot_p50_ms, 0) AS tpot_p50_ratio,
    b.e2e_p99_ms / nullif(a.e2e_p99_ms, 0) AS e2e_p99_ratio,
    b.output_tok_s / nullif(a.output_tok_s, 0) AS output_tok_s_ratio,
    a.cost_per_mtok_output AS a_cost_per_mtok_output,
    b.cost_per_mtok_output AS b_cost_per_mtok_output,
    b.cost_per_mtok_output / nullif(a.cost_per_mtok_output, 0) AS cost_per_mtok_output_ratio
FROM stage_summary AS a
JOIN stage_summary AS b
  ON a.run_id = b.run_id AND a.stage = b.stage AND a.region = b.region
 AND a.provider < b.provider;
