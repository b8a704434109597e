-- tokenbench DuckDB schema, version 21: results of other tools, imported
-- (docs/import.md). An imported run is a run like any other (runs, providers, shards,
-- request_records where the file had rows per request); these tables say where it
-- came from, how its tool defines what it measured, and what the tool printed.

-- One row per imported run: its provenance. A run without a row here was measured by
-- tokenbench. `set_sha256` identifies the files read (the SHA-256 of their sorted
-- SHA-256s): the run id is derived from it, so importing the same files twice gives
-- the same run.
CREATE TABLE IF NOT EXISTS run_imports (
    run_id        VARCHAR PRIMARY KEY,
    tool          VARCHAR NOT NULL,    -- aiperf | guidellm | vllm-bench | inference-perf | llmd
    tool_version  VARCHAR,             -- as the file says; NULL when it does not
    format        VARCHAR NOT NULL,    -- the format read, e.g. 'aiperf profile_export.jsonl'
    per_request   BOOLEAN NOT NULL,    -- rows per request (else: the tool's summaries only)
    model         VARCHAR NOT NULL,
    target        VARCHAR,             -- the endpoint, as the file names it
    started_at    TIMESTAMPTZ,         -- when the tool's run started, as the file says
    files         JSON NOT NULL,       -- [{name, sha256, size}], names as given
    set_sha256    VARCHAR NOT NULL,
    imported_at   TIMESTAMPTZ NOT NULL,
    imported_by   VARCHAR NOT NULL     -- a token id, or 'local' (tokenbench import --db)
);

-- Where the tool's definition of a figure differs from tokenbench's
-- (docs/metrics.md): the comparison names them beside a difference.
CREATE TABLE IF NOT EXISTS import_notes (
    run_id  VARCHAR NOT NULL,
    figure  VARCHAR NOT NULL,          -- ttft | itl | tpot | e2e | output_tokens | start | ...
    note    VARCHAR NOT NULL
);

-- The figures the tool printed per stage, as it printed them (never recomputed):
-- percentiles, means, throughputs. Shown beside tokenbench's own, labelled as the tool's.
CREATE TABLE IF NOT EXISTS import_summaries (
    run_id    VARCHAR NOT NULL,
    stage     INTEGER NOT NULL,
    provider  VARCHAR NOT NULL,
    figure    VARCHAR NOT NULL,        -- ttft | itl | tpot | e2e | output_tokens_per_s | ...
    stat      VARCHAR NOT NULL,        -- p50 | p90 | p99 | mean | ... | rate | total
    value     DOUBLE NOT NULL,
    unit      VARCHAR NOT NULL,
    PRIMARY KEY (run_id, stage, provider, figure, stat)
);
