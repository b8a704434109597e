-- The tokenbench DuckDB schema v1 in its last shipped form (analytics/sql/schema_v1.sql
-- before the views and the request_records DDL moved out of the migrations): what a file
-- written by v1 holds. Tests build such a file and upgrade it (tests/unit/analytics/).

-- tokenbench DuckDB schema, version 1. Applied once by analytics.store.db.migrate().
-- request_records mirrors scenarios/records.py REQUEST_RECORD_SCHEMA (a test holds them together).

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

CREATE TABLE request_records (
    run_id                  VARCHAR NOT NULL,
    stage                   INTEGER NOT NULL,
    shard_id                VARCHAR NOT NULL,
    attempt                 INTEGER NOT NULL,
    seq                     BIGINT NOT NULL,
    provider                VARCHAR NOT NULL,
    model                   VARCHAR NOT NULL,
    region                  VARCHAR NOT NULL,
    worker                  VARCHAR NOT NULL,
    load_kind               VARCHAR NOT NULL,
    concurrency             INTEGER NOT NULL,
    planned_prompt_tokens   INTEGER NOT NULL,
    planned_output_tokens   INTEGER NOT NULL,
    intended_start_at       TIMESTAMPTZ,
    sent_at                 TIMESTAMPTZ,
    first_byte_at           TIMESTAMPTZ,
    first_token_at          TIMESTAMPTZ,
    first_output_token_at   TIMESTAMPTZ,
    last_token_at           TIMESTAMPTZ,
    end_at                  TIMESTAMPTZ,
    schedule_lag_ns         BIGINT,
    first_byte_ns           BIGINT,
    ttft_ns                 BIGINT,
    ttfot_ns                BIGINT,
    last_token_ns           BIGINT,
    e2e_ns                  BIGINT,
    itl_ns                  BIGINT[],
    token_events            INTEGER NOT NULL,
    prompt_tokens           INTEGER,
    completion_tokens       INTEGER,
    reasoning_tokens        INTEGER,
    token_count_source      VARCHAR,
    server_prompt_ns        BIGINT,
    server_decode_ns        BIGINT,
    retries                 INTEGER,
    retry_wait_ns           BIGINT,
    request_key             VARCHAR,
    status                  VARCHAR NOT NULL,
    error_class             VARCHAR,
    http_status             SMALLINT,
    error_message           VARCHAR
);

-- One row per request of the accepted attempt of each shard, with derived metrics (ms).
CREATE VIEW requests AS
SELECT
    r.*,
    r.ttft_ns / 1e6                               AS ttft_ms,
    (r.ttft_ns + r.schedule_lag_ns) / 1e6         AS ttft_from_intent_ms,
    r.ttfot_ns / 1e6                              AS ttfot_ms,
    r.e2e_ns / 1e6                                AS e2e_ms,
    (r.e2e_ns + r.schedule_lag_ns) / 1e6          AS e2e_from_intent_ms,
    r.schedule_lag_ns / 1e6                       AS schedule_lag_ms,
    CASE WHEN r.completion_tokens > 1 AND r.last_token_ns > r.ttft_ns
         THEN (r.last_token_ns - r.ttft_ns) / 1e6 / (r.completion_tokens - 1) END AS tpot_ms,
    CASE WHEN r.completion_tokens > 1 AND r.last_token_ns > r.ttft_ns
         THEN (r.completion_tokens - 1) * 1e9 / (r.last_token_ns - r.ttft_ns) END AS decode_tok_s
FROM request_records AS r
JOIN shards AS s ON s.run_id = r.run_id AND s.shard_id = r.shard_id AND s.accepted_attempt = r.attempt;

-- One row per inter-token gap of a successful request.
CREATE VIEW token_gaps AS
SELECT run_id, stage, provider, region, shard_id, seq, unnest(itl_ns) / 1e6 AS itl_ms
FROM requests
WHERE status = 'ok';
