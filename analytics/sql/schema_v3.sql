-- tokenbench DuckDB schema, version 3: per-shard pre-aggregates, written when a shard
-- settles (analytics/store/summaries.py), so that the report of a large run reads a few
-- thousand stored rows instead of re-scanning every request and ITL gap. Runs stored
-- under v2 get theirs back-filled by the migration. Definitions: docs/analytics.md.

-- One row per settled shard with records, for its accepted attempt: the sums and counts
-- behind every `stage_summary` figure except the percentiles (same definitions; a test
-- holds the two together).
CREATE TABLE shard_summaries (
    run_id          VARCHAR NOT NULL,
    shard_id        VARCHAR NOT NULL,
    attempt         INTEGER NOT NULL,
    stage           INTEGER NOT NULL,
    provider        VARCHAR NOT NULL,
    region          VARCHAR NOT NULL,
    concurrency     INTEGER,
    load_kinds      VARCHAR,               -- distinct load_kind values, comma-separated
    requests        BIGINT NOT NULL,
    ok              BIGINT NOT NULL,
    errors          BIGINT NOT NULL,
    ttft_n          BIGINT NOT NULL,
    tpot_n          BIGINT NOT NULL,
    e2e_n           BIGINT NOT NULL,
    ttft_intent_n   BIGINT NOT NULL,
    e2e_intent_n    BIGINT NOT NULL,
    decode_n        BIGINT NOT NULL,
    decode_sum      DOUBLE,
    input_tokens    HUGEINT,
    output_tokens   HUGEINT,
    has_slo         BOOLEAN,
    met_slo         BIGINT NOT NULL,
    steady          BOOLEAN,
    window_us       BIGINT,
    span_us         BIGINT,
    done            BIGINT,
    ok_done         BIGINT,
    good_done       BIGINT,
    in_tokens_done  HUGEINT,
    out_tokens_done HUGEINT,
    busy_us         HUGEINT,
    PRIMARY KEY (run_id, shard_id)
);

-- Failed requests per error class of a shard's accepted attempt.
CREATE TABLE shard_errors (
    run_id       VARCHAR NOT NULL,
    shard_id     VARCHAR NOT NULL,
    error_class  VARCHAR,
    n            BIGINT NOT NULL
);

-- Log-bucketed histogram of each latency metric of a shard's successful requests:
-- bucket b holds values in (γ^(b−1), γ^b], γ = (1 + α)/(1 − α) (analytics/stats/sketch.py);
-- values ≤ 0 (an ITL gap of two events read together) are in bucket -1000000000.
-- Buckets add across shards, so a group's histogram is the sum of its shards'.
CREATE TABLE shard_histograms (
    run_id    VARCHAR NOT NULL,
    shard_id  VARCHAR NOT NULL,
    metric    VARCHAR NOT NULL,           -- ttft | tpot | e2e | ttft_intent | e2e_intent | itl | decode_tok_s
    bucket    INTEGER NOT NULL,
    n         BIGINT NOT NULL
);
