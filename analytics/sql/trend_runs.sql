-- The runs a trend report reads: ended runs (finished or failed: a failed run's error rate
-- is part of the trend; cancelled and running ones are not) of one schedule, one stored
-- scenario, one scenario name or one provider (and model; imported runs of other tools
-- too), the newest $runs of them, at or before $as_of (a run id; NULL: now), with the
-- tool that measured each. Parameters: $schedule_id, $scenario_id, $name, $provider,
-- $model (NULL: any), $as_of, $runs.
-- {visible}: the caller's read rule on r.run_id (named parameters), filled in by
-- analytics/trends/build.py select_runs (TRUE: every run).
SELECT r.run_id, r.name, r.state, r.created_at, coalesce(i.tool, 'tokenbench') AS tool
FROM runs AS r
LEFT JOIN run_origins AS o USING (run_id)
LEFT JOIN run_imports AS i USING (run_id)
WHERE {visible}
  AND r.state IN ('finished', 'failed')
  AND ($schedule_id IS NULL OR o.schedule_id = $schedule_id)
  AND ($scenario_id IS NULL OR o.scenario_id = $scenario_id)
  AND ($name IS NULL OR r.name = $name)
  AND ($provider IS NULL OR EXISTS (
        SELECT 1 FROM providers AS p
        WHERE p.run_id = r.run_id AND p.provider = $provider
          AND ($model IS NULL OR p.model = $model)))
  AND ($as_of IS NULL OR r.created_at <= (SELECT created_at FROM runs WHERE run_id = $as_of))
ORDER BY r.created_at DESC, r.run_id DESC
LIMIT $runs
