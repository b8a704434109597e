-- tokenbench DuckDB schema, version 6: counts that a run can push past 2^31 are BIGINT.
-- A shard's planned requests, concurrency and records (and an attempt's records and
-- batches) were INTEGER; a value above 2147483647 failed its INSERT inside the run's
-- transaction. Scenarios are bounded well below that (docs/security.md, Bounds): the
-- wider columns are the second line of defence.
ALTER TABLE shards ALTER concurrency TYPE BIGINT;
ALTER TABLE shards ALTER planned_requests TYPE BIGINT;
ALTER TABLE shards ALTER records TYPE BIGINT;
ALTER TABLE shard_attempts ALTER records TYPE BIGINT;
ALTER TABLE shard_attempts ALTER batches TYPE BIGINT;
