-- Each stage's first and last send, in seconds since the run's first send (wall clock).
-- Parameters: $run_id.
WITH req AS (
    SELECT stage, epoch_us(sent_at) AS t
    FROM requests
    WHERE run_id = $run_id AND sent_at IS NOT NULL
)
SELECT stage,
       (min(t) - (SELECT min(t) FROM req)) / 1e6 AS start_s,
       (max(t) - (SELECT min(t) FROM req)) / 1e6 AS end_s,
       any_value(s.concurrency)                  AS concurrency
FROM req
LEFT JOIN (SELECT stage AS s_stage, max(concurrency) AS concurrency
           FROM stages WHERE run_id = $run_id GROUP BY stage) AS s
  ON s.s_stage = req.stage
GROUP BY stage
ORDER BY stage
