-- tokenbench DuckDB schema, version 12: multi-turn sessions (workload.sessions, a replayed
-- session log; docs/workloads.md). `session_id` is the session's number in its stage
-- (the same session for every provider and region), `turn` its turn (from 1) of the
-- `session_turns` it planned, `context_tokens` the earlier turns' tokens sent with this
-- one, and `session_end`, on the session's last turn, why it ended: done, error,
-- context_cap or stage_end. NULL for requests outside a session and rows before v12.
ALTER TABLE request_records ADD COLUMN IF NOT EXISTS session_id BIGINT;
ALTER TABLE request_records ADD COLUMN IF NOT EXISTS turn INTEGER;
ALTER TABLE request_records ADD COLUMN IF NOT EXISTS session_turns INTEGER;
ALTER TABLE request_records ADD COLUMN IF NOT EXISTS context_tokens INTEGER;
ALTER TABLE request_records ADD COLUMN IF NOT EXISTS session_end VARCHAR;
