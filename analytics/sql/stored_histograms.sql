-- Each stage x provider x region's histogram per metric: the sum of its shards' stored
-- histograms (accepted attempts only), buckets ascending. Parameters: $run_id.
SELECT m.stage, m.provider, m.region, h.metric, h.bucket, sum(h.n) AS n
FROM shard_histograms AS h
JOIN shard_summaries AS m USING (run_id, shard_id)
JOIN shards AS s
  ON s.run_id = m.run_id AND s.shard_id = m.shard_id AND s.accepted_attempt = m.attempt
WHERE h.run_id = $run_id
GROUP BY ALL
ORDER BY m.stage, m.provider, m.region, h.metric, h.bucket
