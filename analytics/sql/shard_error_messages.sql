-- The most frequent (error class, message) pairs of one settled shard's accepted attempt,
-- at most $keep of them. Parameters: $run_id, $shard_id, $keep.
INSERT INTO shard_error_messages
SELECT $run_id, $shard_id, error_class, error_message, count(*) AS n
FROM requests
WHERE run_id = $run_id AND shard_id = $shard_id AND status = 'error'
GROUP BY error_class, error_message
ORDER BY n DESC, error_class, error_message
LIMIT $keep
