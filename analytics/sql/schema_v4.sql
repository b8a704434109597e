-- tokenbench DuckDB schema, version 4: each attempt's self-measurement of its client
-- (event-loop lag, CPU, schedule lag, achieved vs scheduled rate, steady-state window),
-- as the worker published it with `shard_finished` (docs/load.md), so a report can flag
-- a client-bound stage with the figures that made it so.
ALTER TABLE shard_attempts ADD COLUMN health JSON;
