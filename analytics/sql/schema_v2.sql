-- tokenbench DuckDB schema, version 2: the scenario's dimensions as tables. Applied once
-- by analytics.store.db.migrate(); runs stored under v1 get their dimension rows back-filled
-- from runs.scenario (analytics/store/dimensions.py). The summary views that read them are
-- code (sql/views/), (re)created on connect. Definitions: docs/analytics.md.

-- One row per provider of a run, with what cost needs. gpu_hour_usd is resolved when the
-- run is created (scenario value, else the hardware catalog's default) so that a later
-- catalog price change never rewrites the cost of a past run.
CREATE TABLE providers (
    run_id            VARCHAR NOT NULL,
    provider          VARCHAR NOT NULL,
    kind              VARCHAR NOT NULL,
    model             VARCHAR,
    input_per_mtok    DOUBLE,             -- pricing: USD per 1M prompt tokens (hosted APIs)
    output_per_mtok   DOUBLE,             -- pricing: USD per 1M completion tokens
    hardware          VARCHAR,            -- deployment: hardware catalog id (self-hosted)
    gpus              INTEGER,
    quantization      VARCHAR,
    deployment_model  VARCHAR,
    gpu_hour_usd      DOUBLE,             -- per GPU; NULL when unknown
    gpu_hour_source   VARCHAR,            -- scenario | catalog | NULL
    PRIMARY KEY (run_id, provider)
);

CREATE TABLE regions (
    run_id  VARCHAR NOT NULL,
    region  VARCHAR NOT NULL,
    PRIMARY KEY (run_id, region)
);

-- The scenario's per-request objectives; NULL means "no objective on this metric".
CREATE TABLE slos (
    run_id   VARCHAR PRIMARY KEY,
    ttft_ms  DOUBLE,
    tpot_ms  DOUBLE,
    e2e_ms   DOUBLE
);
