-- tokenbench DuckDB schema, version 9: how each request's planned prompt length was made
-- true (docs/lengths.md): `tokenizer` (counted with the workload's tokenizer), `calibrated`
-- (words scaled by the server's measured tokens per word and template tokens, recorded
-- beside it), `warmup` (one word a token while calibrating), `words`, `estimate` (a
-- file's text at 4 characters a token). NULL on rows recorded before v9.
ALTER TABLE request_records ADD COLUMN IF NOT EXISTS planned_prompt_source VARCHAR;
ALTER TABLE request_records ADD COLUMN IF NOT EXISTS prompt_tokens_per_word DOUBLE;
ALTER TABLE request_records ADD COLUMN IF NOT EXISTS prompt_template_tokens DOUBLE;
