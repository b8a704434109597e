-- Requests per provider x region x outcome class over the run's duration, in $buckets equal
-- time buckets by send instant (wall clock: correlation across machines is all it is used
-- for here), with each stage's first and last send in seconds since the run's first send.
-- Parameters: $run_id, $buckets.
WITH req AS (
    SELECT stage, provider, region, coalesce(error_class, 'ok') AS outcome,
           epoch_us(sent_at) AS t
    FROM requests
    WHERE run_id = $run_id AND sent_at IS NOT NULL
),
bounds AS (
    SELECT min(t) AS t0, max(t) AS t1 FROM req
)
SELECT least(CAST(floor((r.t - b.t0) / nullif(b.t1 - b.t0, 0) * $buckets) AS INTEGER),
             $buckets - 1)                    AS bucket,
       r.provider,
       r.region,
       r.outcome,
       count(*)                               AS n,
       any_value((b.t1 - b.t0) / 1e6)         AS duration_s
FROM req AS r, bounds AS b
GROUP BY ALL
ORDER BY bucket, r.provider, r.region, r.outcome
