-- tokenbench DuckDB schema, version 18: stages decided while a run goes (load.sweep,
-- load.find_capacity) and stages ended early (over-saturated, or their interval tight
-- enough: load.saturation, load.stop_when). docs/answers.md describes every column.
--
-- The shards of a decided stage are appended to `shards` when the control plane decides
-- it (the stored plan stays the record of what ran); these tables say why.

-- One row per decided (or planned-adaptive) stage and provider: its role in the sweep or
-- search, its level (req/s for `open`, streams for `closed`) and why that level.
CREATE TABLE IF NOT EXISTS adaptive_stages (
    run_id      VARCHAR NOT NULL,
    stage       INTEGER NOT NULL,
    provider    VARCHAR NOT NULL,
    role        VARCHAR NOT NULL,   -- synchronous | throughput | sweep | probe
    load_kind   VARCHAR NOT NULL,   -- open | closed
    level       DOUBLE NOT NULL,
    reason      VARCHAR,
    decided_at  TIMESTAMP WITH TIME ZONE NOT NULL,
    PRIMARY KEY (run_id, stage, provider)
);

-- A stage a provider's shards were stopped in, in every region, with the evidence.
CREATE TABLE IF NOT EXISTS stage_outcomes (
    run_id            VARCHAR NOT NULL,
    stage             INTEGER NOT NULL,
    provider          VARCHAR NOT NULL,
    outcome           VARCHAR NOT NULL,   -- saturated | stopped_early
    acted             BOOLEAN NOT NULL,   -- its shards were told to stop (false: marked only)
    reason            VARCHAR NOT NULL,
    evidence          JSON NOT NULL,
    requests_planned  BIGINT,             -- the stage's planned requests (all regions)
    requests_done     BIGINT,             -- ended when it was decided
    elapsed_s         DOUBLE,
    decided_at        TIMESTAMP WITH TIME ZONE NOT NULL,
    PRIMARY KEY (run_id, stage, provider)
);

-- A capacity search's verdict on each of its stages and providers, judged once the stage
-- settled: pass | fail | undecided, with the attainment and its Wilson interval (the
-- worst region's), and each region's figures.
CREATE TABLE IF NOT EXISTS stage_verdicts (
    run_id        VARCHAR NOT NULL,
    stage         INTEGER NOT NULL,
    provider      VARCHAR NOT NULL,
    verdict       VARCHAR NOT NULL,
    attainment    DOUBLE,
    low           DOUBLE,
    high          DOUBLE,
    requests      BIGINT NOT NULL,
    met           BIGINT NOT NULL,
    measured_rps  DOUBLE,
    regions       JSON NOT NULL,
    PRIMARY KEY (run_id, stage, provider)
);

-- Where each provider's capacity search stands: its bracket [low, high) (low held with
-- confidence, high did not), the stages that measured them, and how it ended.
CREATE TABLE IF NOT EXISTS capacity_results (
    run_id      VARCHAR NOT NULL,
    provider    VARCHAR NOT NULL,
    search_by   VARCHAR NOT NULL,   -- rate | concurrency
    state       VARCHAR NOT NULL,   -- searching | converged | max_stages | unattainable | at_max | failed
    low         DOUBLE,
    high        DOUBLE,
    low_stage   INTEGER,
    high_stage  INTEGER,
    stages      INTEGER NOT NULL,
    message     VARCHAR NOT NULL,
    updated_at  TIMESTAMP WITH TIME ZONE NOT NULL,
    PRIMARY KEY (run_id, provider)
);
