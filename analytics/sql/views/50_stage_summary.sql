-- Per run x stage x provider x region: `stage_summary_measured` with the stage's level
-- from the plan. The records carry a part's share of the level (a stage at concurrency
-- 1000 split into 4 parts has shards of 250), so `concurrency` here is the stage's level
-- (`shards.stage_concurrency`) and `part_concurrency` the largest part's share.
CREATE OR REPLACE VIEW stage_summary AS
SELECT m.* REPLACE (p.concurrency AS concurrency), p.part_concurrency
FROM stage_summary_measured AS m
LEFT JOIN (SELECT run_id, stage, provider, region,
                  max(stage_concurrency) AS concurrency, max(concurrency) AS part_concurrency
           FROM shards GROUP BY ALL) AS p
       USING (run_id, stage, provider, region);
