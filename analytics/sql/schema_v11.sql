-- tokenbench DuckDB schema, version 11: token truth per request (docs/metrics.md).
-- `prompt_count_source` says how `prompt_tokens` was counted: `usage` (the server's),
-- `tokenizer` (the workload's tokenizer, when the server reported none); NULL with a NULL
-- `prompt_tokens` when neither could count it. `finish_reason` is why the answer ended
-- (stop | length | tool_calls | content_filter | the server's own word), NULL for
-- dialects that never say (Replicate) and for failed requests. NULL on rows recorded
-- before v11, whose `events` rows carried the planned prompt length in `prompt_tokens`.
ALTER TABLE request_records ADD COLUMN IF NOT EXISTS prompt_count_source VARCHAR;
ALTER TABLE request_records ADD COLUMN IF NOT EXISTS finish_reason VARCHAR;
