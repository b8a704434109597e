-- One row per stage of a run: its level, and the largest part's share of it.
CREATE OR REPLACE VIEW stages AS
SELECT
    run_id, stage,
    max(stage_concurrency)                          AS concurrency,
    max(concurrency)                                AS part_concurrency,
    count(*)                                        AS shards,
    count(*) FILTER (state = 'finished')            AS shards_finished,
    sum(records)                                    AS records
FROM shards
GROUP BY run_id, stage;

