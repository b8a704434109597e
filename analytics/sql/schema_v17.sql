-- tokenbench DuckDB schema, version 17: failover (scenario.upstreams, docs/failover.md).
-- A run with upstreams sends each request's id (`client_request_id`, also in the header
-- x-tokenbench-request and the body's `user`) and records it with `prompt_hash`, a hash
-- of its messages; NULL in other runs and on rows before v17.
ALTER TABLE request_records ADD COLUMN IF NOT EXISTS client_request_id VARCHAR;
ALTER TABLE request_records ADD COLUMN IF NOT EXISTS prompt_hash VARCHAR;

-- What each simulated upstream of a run received and how it answered, read from its log
-- (GET /tokenbench/requests) while the run went on: `request_id` as it arrived (header,
-- else the body's `user`), the same `prompt_hash`, the HTTP `status` (0: connection
-- reset before any byte) and `outcome` (ok | http_429 | http_5xx | http_4xx | reset |
-- cut | unfinished | bad_request), `stall_ms` of silence it added first.
CREATE TABLE IF NOT EXISTS upstream_requests (
    run_id       VARCHAR NOT NULL,
    upstream     VARCHAR NOT NULL,
    seq          BIGINT NOT NULL,        -- the upstream's own sequence number, from 1
    received_at  TIMESTAMPTZ NOT NULL,   -- wall clock of one machine: orders attempts
    request_id   VARCHAR,
    prompt_hash  VARCHAR,
    status       INTEGER NOT NULL,
    outcome      VARCHAR NOT NULL,
    stall_ms     DOUBLE,
    PRIMARY KEY (run_id, upstream, seq)
);

-- One row per upstream of a run: where it listened, how many log entries were stored,
-- and how many were lost (dropped from its bounded log before they were read).
CREATE TABLE IF NOT EXISTS upstream_logs (
    run_id      VARCHAR NOT NULL,
    upstream    VARCHAR NOT NULL,
    port        INTEGER NOT NULL,
    entries     BIGINT NOT NULL,
    missed      BIGINT NOT NULL,
    started_at  TIMESTAMPTZ,              -- its fault clock's start (first chat request)
    PRIMARY KEY (run_id, upstream)
);
