-- The figures a trend report follows, per run x stage x provider x region, for many runs
-- in one pass over the `stage_summary` view (the report's own rows: same definitions).
-- Parameters: $run_ids (a list).
SELECT run_id, stage, provider, region, concurrency, requests, errors, error_rate,
       ttft_n, ttft_p50_ms, ttft_p99_ms, output_tok_s, cost_per_mtok_output
FROM stage_summary
WHERE list_contains($run_ids, run_id)
ORDER BY run_id, provider, region, stage
