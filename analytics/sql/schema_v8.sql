-- tokenbench DuckDB schema, version 8: the most frequent error messages of each settled
-- shard's accepted attempt, written with its other pre-aggregates (analytics/store/summaries.py),
-- so that the report of a large run, read from stored aggregates, lists a stage's most
-- frequent errors as the report of a small run does from the raw records
-- (analytics/report/top_errors.py). Messages are as the workers recorded them: redacted
-- (scenarios/security/redaction.py). Runs stored under v7 get theirs back-filled by the migration.
CREATE TABLE IF NOT EXISTS shard_error_messages (
    run_id       VARCHAR NOT NULL,
    shard_id     VARCHAR NOT NULL,
    error_class  VARCHAR,
    message      VARCHAR,
    n            BIGINT NOT NULL
);
