-- tokenbench DuckDB schema, version 14: datasets converted from ShareGPT JSON, CSV,
-- Parquet, Arrow or Hugging Face hub files (workload.dataset, docs/workloads.md), and
-- the dataset row each request came from.
-- `source_sha256` is the hex SHA-256 of the bytes that were read (the file before any
-- conversion), `source_format` what they were (e.g. parquet/sharegpt, jsonl),
-- `conversion` the canonical JSON of the format and column mapping applied (NULL when
-- stored as uploaded), `source_rows` the file's rows, `skipped_rows` the rows left out
-- by reason ({"no user turn": 3}), `unanswered` the entries without an answer length,
-- `origin` the file name or hub dataset (`hub:owner/name@commit`) the uploader named.
ALTER TABLE datasets ADD COLUMN IF NOT EXISTS source_sha256 VARCHAR;
ALTER TABLE datasets ADD COLUMN IF NOT EXISTS source_format VARCHAR;
ALTER TABLE datasets ADD COLUMN IF NOT EXISTS conversion VARCHAR;
ALTER TABLE datasets ADD COLUMN IF NOT EXISTS source_rows BIGINT;
ALTER TABLE datasets ADD COLUMN IF NOT EXISTS skipped_rows VARCHAR;
ALTER TABLE datasets ADD COLUMN IF NOT EXISTS unanswered BIGINT;
ALTER TABLE datasets ADD COLUMN IF NOT EXISTS origin VARCHAR;
-- `dataset_id` is the uploaded dataset a request's prompt came from (workload.dataset,
-- .prompts or .replay), `dataset_row` its 0-based row in the file. NULL for generated
-- prompts and for rows recorded before v14.
ALTER TABLE request_records ADD COLUMN IF NOT EXISTS dataset_id VARCHAR;
ALTER TABLE request_records ADD COLUMN IF NOT EXISTS dataset_row BIGINT;
