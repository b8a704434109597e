-- The report's per stage x provider x region rows of one run: the `stage_summary` view
-- (sql/views/), whose run filter DuckDB pushes down into every aggregate.
-- Parameters: $run_id.
SELECT *
FROM stage_summary
WHERE run_id = $run_id
ORDER BY provider, stage, region
