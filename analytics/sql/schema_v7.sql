-- tokenbench DuckDB schema, version 7: the shard plan is stored, and a stage's level is
-- kept apart from a part's share of it.
--
-- A run's shards were re-planned from its scenario whenever they were needed (a restart,
-- the run view), with whatever settings were in force then: a changed
-- max_streams_per_shard split the stages differently and the stored shards no longer
-- matched. Each shard now keeps the spec it was dispatched with (`spec`, a
-- scenarios/wire/contract.py ShardSpec as JSON) and its place in the plan (`plan_position`);
-- runs stored before v7 have neither and are re-planned as before.
--
-- A stage at concurrency 1000 split into 4 parts has shards of concurrency 250: that
-- is each part's share (`concurrency`, what its worker drives); `stage_concurrency` is
-- the stage's level (virtual users, or the open loop's in-flight cap, 0: none), the same
-- for every shard of the stage.
ALTER TABLE shards ADD COLUMN stage_concurrency BIGINT;
ALTER TABLE shards ADD COLUMN plan_position INTEGER;
ALTER TABLE shards ADD COLUMN spec JSON;

-- Every provider and region of a stage is split into the same parts, whose shares sum to
-- the level (closed loop: virtual users; open loop: the in-flight cap, 0 when none).
UPDATE shards SET stage_concurrency = t.level
FROM (SELECT run_id, stage, provider, region, sum(concurrency) AS level
      FROM shards GROUP BY ALL) AS t
WHERE shards.run_id = t.run_id AND shards.stage = t.stage
  AND shards.provider = t.provider AND shards.region = t.region;
-- (The `stages` and `stage_summary` views that read the level are code, sql/views/.)
