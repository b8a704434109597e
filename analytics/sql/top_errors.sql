-- The most frequent (error class, message) pairs per stage x provider x region of a run,
-- from the raw records (accepted attempts), at most $keep per group.
-- Parameters: $run_id, $keep.
SELECT stage, provider, region, error_class, error_message AS message, count(*) AS n
FROM requests
WHERE run_id = $run_id AND status = 'error'
GROUP BY stage, provider, region, error_class, error_message
QUALIFY row_number() OVER (
    PARTITION BY stage, provider, region ORDER BY n DESC, error_class, message) <= $keep
ORDER BY provider, stage, region, n DESC, error_class, message
