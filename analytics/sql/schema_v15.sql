-- tokenbench DuckDB schema, version 15: server telemetry (providers[].metrics_url,
-- docs/telemetry.md). One row per scrape of a provider's Prometheus endpoint by a shard
-- attempt (failed scrapes too, with their reason), and one row per sample of the known
-- metric names as the server exposed them; the view `server_metrics_canonical` maps them
-- to engine-independent names. Stored once per (run_id, shard_id, attempt, scrape_seq).
CREATE TABLE IF NOT EXISTS server_metric_scrapes (
    run_id         VARCHAR NOT NULL,
    stage          INTEGER NOT NULL,
    provider       VARCHAR NOT NULL,
    region         VARCHAR NOT NULL,
    shard_id       VARCHAR NOT NULL,
    attempt        INTEGER NOT NULL,
    worker         VARCHAR NOT NULL,
    scrape_seq     INTEGER NOT NULL,
    scraped_at     TIMESTAMPTZ NOT NULL,
    duration_ns    BIGINT NOT NULL,
    status         VARCHAR NOT NULL,
    http_status    SMALLINT,
    error_message  VARCHAR,
    body_bytes     BIGINT,
    series         INTEGER NOT NULL,
    series_dropped INTEGER
);
CREATE TABLE IF NOT EXISTS server_metrics (
    run_id     VARCHAR NOT NULL,
    stage      INTEGER NOT NULL,
    provider   VARCHAR NOT NULL,
    region     VARCHAR NOT NULL,
    shard_id   VARCHAR NOT NULL,
    attempt    INTEGER NOT NULL,
    scrape_seq INTEGER NOT NULL,
    scraped_at TIMESTAMPTZ NOT NULL,
    metric     VARCHAR NOT NULL,
    labels     MAP(VARCHAR, VARCHAR),
    value      DOUBLE NOT NULL
);
