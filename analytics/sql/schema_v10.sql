-- tokenbench DuckDB schema, version 10: tool calls (workload.tools). `tools_offered` says
-- the request carried tools; `tool_call` that the answer streamed a tool call,
-- `tool_call_at_ns` when its first delta arrived (ns since sent; it also counts as the
-- first token, docs/metrics.md) and `tool_calls` how many calls it made. NULL on rows
-- recorded before v10.
ALTER TABLE request_records ADD COLUMN IF NOT EXISTS tools_offered BOOLEAN;
ALTER TABLE request_records ADD COLUMN IF NOT EXISTS tool_call BOOLEAN;
ALTER TABLE request_records ADD COLUMN IF NOT EXISTS tool_call_at_ns BIGINT;
ALTER TABLE request_records ADD COLUMN IF NOT EXISTS tool_calls INTEGER;
