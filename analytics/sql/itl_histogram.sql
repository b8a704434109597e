-- ITL histogram per provider of one run on log-spaced bins between the run's smallest and
-- largest positive gap. Bucket b covers [lo·r^b, lo·r^(b+1)), r = (hi/lo)^(1/$bins).
-- Parameters: $run_id, $bins.
WITH gaps AS (
    SELECT provider, itl_ms FROM token_gaps WHERE run_id = $run_id AND itl_ms > 0
),
bounds AS (
    SELECT min(itl_ms) AS lo, max(itl_ms) AS hi FROM gaps
)
SELECT g.provider,
       least(CAST(floor(ln(g.itl_ms / b.lo) / nullif(ln(b.hi / b.lo), 0) * $bins) AS INTEGER),
             $bins - 1)                          AS bucket,
       count(*)                                  AS n,
       any_value(b.lo)                           AS lo_ms,
       any_value(b.hi)                           AS hi_ms
FROM gaps AS g, bounds AS b
GROUP BY ALL
ORDER BY g.provider, bucket
