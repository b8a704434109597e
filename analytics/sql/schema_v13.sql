-- tokenbench DuckDB schema, version 13: schedules (docs/tracking.md). A schedule starts a
-- run of a stored scenario on a cron expression, inside `tokenbench serve`; the file is
-- the truth: the control plane loads the schedules from here when it starts, and
-- `fire_anchor_at` (the last fire handled, or when the schedule was created or resumed)
-- tells it which fires it missed while it was down (one catch-up run, not one per miss).
CREATE TABLE IF NOT EXISTS schedules (
    schedule_id       VARCHAR PRIMARY KEY,
    name              VARCHAR,
    scenario_id       VARCHAR NOT NULL,
    cron              VARCHAR NOT NULL,
    timezone          VARCHAR NOT NULL,
    overrides         JSON,                 -- RunOverrides, as POST /v1/runs takes them
    wait_for_workers  BOOLEAN NOT NULL,
    webhook_url       VARCHAR,              -- checked by the egress policy; no secrets
    trend_window      INTEGER NOT NULL,     -- earlier runs the regression verdict uses
    min_change        DOUBLE NOT NULL,      -- smallest change that counts (relative)
    state             VARCHAR NOT NULL,     -- active | paused | deleted
    created_at        TIMESTAMPTZ NOT NULL,
    fire_anchor_at    TIMESTAMPTZ NOT NULL
);

-- Every fire: `started` (run_id set), `skipped` (the schedule's previous run was still
-- running), `failed` (the run could not be created: message says why) or `missed`.
-- `kind` is `scheduled` or `catch_up` (a fire missed while the control plane was down).
-- Once the run has ended, `evaluated_at` is set and `regressions` holds what its trend
-- flagged (a JSON list, empty when nothing).
CREATE TABLE IF NOT EXISTS schedule_fires (
    schedule_id    VARCHAR NOT NULL,
    seq            INTEGER NOT NULL,
    scheduled_for  TIMESTAMPTZ NOT NULL,
    fired_at       TIMESTAMPTZ NOT NULL,
    kind           VARCHAR NOT NULL,
    outcome        VARCHAR NOT NULL,
    run_id         VARCHAR,
    message        VARCHAR,
    evaluated_at   TIMESTAMPTZ,
    regressions    JSON,
    PRIMARY KEY (schedule_id, seq)
);

-- Webhook notifications of regressions: one row per notification, its tries and outcome
-- (`delivered` on a 2xx, else `failed` or `refused` by the egress policy).
CREATE TABLE IF NOT EXISTS schedule_webhooks (
    schedule_id   VARCHAR NOT NULL,
    run_id        VARCHAR NOT NULL,
    sent_at       TIMESTAMPTZ NOT NULL,
    attempts      INTEGER NOT NULL,
    status        INTEGER,                  -- the last try's HTTP status, if one answered
    outcome       VARCHAR NOT NULL,
    message       VARCHAR,
    PRIMARY KEY (schedule_id, run_id)
);

-- Where a run submitted over REST came from: the stored scenario, and the schedule whose
-- fire started it. Trends select runs by either.
CREATE TABLE IF NOT EXISTS run_origins (
    run_id       VARCHAR PRIMARY KEY,
    scenario_id  VARCHAR,
    schedule_id  VARCHAR
);
