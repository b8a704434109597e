-- tokenbench DuckDB schema, version 1: the run lifecycle. Applied once by
-- analytics.store.db.migrate(), which also creates `request_records` in this version from the
-- Arrow record schema (scenarios/wire/records.py, through analytics/store/record_table.py). Views and
-- macros are not migrations: they are (re)created on connect (analytics/store/views.py).

CREATE TABLE runs (
    run_id        VARCHAR PRIMARY KEY,
    name          VARCHAR NOT NULL,
    scenario      JSON NOT NULL,          -- the validated scenario; API keys appear only as env var names
    created_at    TIMESTAMPTZ NOT NULL,
    finished_at   TIMESTAMPTZ,
    state         VARCHAR NOT NULL        -- running | finished | failed | cancelled
);

CREATE TABLE shards (
    run_id            VARCHAR NOT NULL,
    shard_id          VARCHAR NOT NULL,
    stage             INTEGER NOT NULL,
    provider          VARCHAR NOT NULL,
    region            VARCHAR NOT NULL,
    concurrency       INTEGER NOT NULL,
    planned_requests  INTEGER,
    state             VARCHAR NOT NULL,   -- planned | dispatched | running | finished | failed | cancelled
    accepted_attempt  INTEGER,            -- the attempt whose records count; others are kept, not mixed in
    records           INTEGER NOT NULL DEFAULT 0,
    message           VARCHAR,
    dispatches        INTEGER NOT NULL DEFAULT 0,  -- times its task was sent (re-sent after a worker loss)
    PRIMARY KEY (run_id, shard_id)
);

CREATE TABLE shard_attempts (
    run_id       VARCHAR NOT NULL,
    shard_id     VARCHAR NOT NULL,
    attempt      INTEGER NOT NULL,
    worker       VARCHAR,
    state        VARCHAR NOT NULL,        -- running | finished | failed | abandoned
    started_at   TIMESTAMPTZ,
    finished_at  TIMESTAMPTZ,
    records      INTEGER,
    batches      INTEGER,
    message      VARCHAR,
    PRIMARY KEY (run_id, shard_id, attempt)
);

CREATE TABLE ingested_batches (
    run_id       VARCHAR NOT NULL,
    shard_id     VARCHAR NOT NULL,
    attempt      INTEGER NOT NULL,
    batch_seq    INTEGER NOT NULL,
    rows         INTEGER NOT NULL,
    ingested_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (run_id, shard_id, attempt, batch_seq)
);
