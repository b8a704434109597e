-- One row per inter-token gap of a successful request.
CREATE OR REPLACE VIEW token_gaps AS
SELECT run_id, stage, provider, region, shard_id, seq, unnest(itl_ns) / 1e6 AS itl_ms
FROM requests
WHERE status = 'ok';
