-- Failed requests per error class of one settled shard's accepted attempt.
-- Parameters: $run_id, $shard_id.
INSERT INTO shard_errors
SELECT $run_id, $shard_id, error_class, count(*)
FROM requests
WHERE run_id = $run_id AND shard_id = $shard_id AND status = 'error'
GROUP BY error_class
