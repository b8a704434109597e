-- tokenbench DuckDB schema, version 5: uploaded datasets (JSONL prompt files and
-- traffic logs, POST /v1/datasets or a local file of `tokenbench run`), stored by
-- content. Scenarios name them by id; the control plane hands their bytes to workers
-- through Redis, so no process ever reads a file a remote scenario names.
CREATE TABLE IF NOT EXISTS datasets (
    dataset_id      VARCHAR PRIMARY KEY,   -- 'ds-' || hex SHA-256 of content
    bytes           BIGINT NOT NULL,
    entries         BIGINT NOT NULL,       -- lines with a prompt (blank and # lines excluded)
    kinds           VARCHAR[] NOT NULL,    -- uses it is valid for: prompts, replay
    replay_problem  VARCHAR,               -- why it cannot be replayed (NULL when it can)
    replay_times    DOUBLE[],              -- its timestamps in order, when it can be replayed
    created_at      TIMESTAMPTZ NOT NULL,
    content         BLOB NOT NULL
);
