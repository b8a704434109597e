-- The most frequent (error class, message) pairs per stage x provider x region of a run,
-- from the shards' stored lists (schema_v8.sql) instead of the raw records: each shard
-- keeps its most frequent few, which add across the group's shards. At most $keep per
-- group. Parameters: $run_id, $keep.
SELECT s.stage, s.provider, s.region, e.error_class, e.message, sum(e.n) AS n
FROM shard_error_messages AS e
JOIN shards AS s ON s.run_id = e.run_id AND s.shard_id = e.shard_id
WHERE e.run_id = $run_id
GROUP BY s.stage, s.provider, s.region, e.error_class, e.message
QUALIFY row_number() OVER (PARTITION BY s.stage, s.provider, s.region
                           ORDER BY sum(e.n) DESC, e.error_class, e.message) <= $keep
ORDER BY s.provider, s.stage, s.region, sum(e.n) DESC, e.error_class, e.message
