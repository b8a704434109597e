-- tokenbench DuckDB schema, version 19: many teams on one service (docs/teams.md).
-- Who may call (hashed tokens with a team and a role), who owns what, what teams may
-- spend and did spend, runs waiting for their targets, and the audit log. A database
-- written before v19 has no owners: its objects belong to team `default`.

-- One row per team that has a token or a setting. Quotas and budget NULL: the
-- service-wide default (TOKENBENCH__TEAMS__*).
CREATE TABLE IF NOT EXISTS teams (
    team                 VARCHAR PRIMARY KEY,
    visibility           VARCHAR NOT NULL DEFAULT 'org',   -- org | team: who reads its results
    monthly_budget_usd   DOUBLE,                           -- NULL: the default budget
    max_concurrent_runs  INTEGER,
    max_queued_runs      INTEGER,
    max_schedules        INTEGER,
    max_dataset_bytes    BIGINT,
    created_at           TIMESTAMPTZ NOT NULL,
    updated_at           TIMESTAMPTZ NOT NULL
);

-- Tokens minted by an admin. Only the SHA-256 of the token is stored: nothing here can
-- be replayed as a token.
CREATE TABLE IF NOT EXISTS api_tokens (
    token_id      VARCHAR PRIMARY KEY,      -- 'tok-' || 12 hex, also inside the token
    token_sha256  VARCHAR NOT NULL,         -- hex SHA-256 of the whole token
    team          VARCHAR NOT NULL,
    role          VARCHAR NOT NULL,         -- viewer | submitter | admin
    name          VARCHAR,
    created_at    TIMESTAMPTZ NOT NULL,
    created_by    VARCHAR,                  -- token id of the admin who minted it
    expires_at    TIMESTAMPTZ,              -- NULL: never
    revoked_at    TIMESTAMPTZ,
    last_used_at  TIMESTAMPTZ
);

-- Who owns each object: its team and the token that created it. ``visibility`` is a
-- run's own override (NULL: its team's setting at read time).
CREATE TABLE IF NOT EXISTS object_owners (
    kind        VARCHAR NOT NULL,           -- scenario | run | dataset | schedule | session
    object_id   VARCHAR NOT NULL,
    team        VARCHAR NOT NULL,
    token_id    VARCHAR,
    visibility  VARCHAR,                    -- org | team | NULL
    created_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (kind, object_id)
);

-- What each run spent, per provider and UTC day, from recorded usage x price.
CREATE TABLE IF NOT EXISTS spend_ledger (
    team           VARCHAR NOT NULL,
    provider       VARCHAR NOT NULL,
    day            DATE NOT NULL,
    run_id         VARCHAR NOT NULL,
    input_tokens   BIGINT NOT NULL,
    output_tokens  BIGINT NOT NULL,
    usd            DOUBLE NOT NULL,
    updated_at     TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (run_id, provider, day)
);

-- A run's dry-run plan and cost bound as computed when it was submitted (NULL bound: a
-- priced provider without one), its own cap (scenario budget.max_cost_usd), the team its
-- spend is charged to, and why the control plane stopped it (stop_reason 'budget').
CREATE TABLE IF NOT EXISTS run_cost_bounds (
    run_id          VARCHAR PRIMARY KEY,
    team            VARCHAR NOT NULL,
    cost_bound_usd  DOUBLE,
    max_cost_usd    DOUBLE,
    plan            JSON,
    created_at      TIMESTAMPTZ NOT NULL,
    stop_reason     VARCHAR,                -- budget | NULL
    stop_detail     VARCHAR,                -- the figures and the setting
    stopped_at      TIMESTAMPTZ
);

-- Runs waiting for their targets (endpoint leases) or their team's concurrency quota:
-- the request as accepted, so a restarted control plane still has them queued.
CREATE TABLE IF NOT EXISTS run_queue (
    run_id       VARCHAR PRIMARY KEY,
    team         VARCHAR NOT NULL,
    token_id     VARCHAR,
    queued_at    TIMESTAMPTZ NOT NULL,
    scenario     JSON NOT NULL,             -- validated, with overrides applied
    targets      VARCHAR[] NOT NULL,        -- the lease keys it needs
    request      JSON NOT NULL              -- what else the start needs (origin, waits)
);

-- Every change and every SQL query: who, when, what, outcome. Never a token or secret.
CREATE SEQUENCE IF NOT EXISTS audit_seq;
CREATE TABLE IF NOT EXISTS audit_log (
    seq          BIGINT PRIMARY KEY DEFAULT nextval('audit_seq'),
    happened_at  TIMESTAMPTZ NOT NULL,
    token_id     VARCHAR,
    team         VARCHAR,
    role         VARCHAR,
    action       VARCHAR NOT NULL,          -- e.g. run.submit, token.revoke, sql.query
    object_kind  VARCHAR,
    object_id    VARCHAR,
    outcome      VARCHAR NOT NULL,          -- ok | refused | failed
    detail       JSON
);

-- Datasets are stored by content: a second team uploading the same bytes gets the same
-- id. Each team that uploaded them has a row here, with its own file name and time, and
-- reads and uses the dataset by it, whoever owns the stored object (object_owners).
CREATE TABLE IF NOT EXISTS dataset_users (
    dataset_id  VARCHAR NOT NULL,
    team        VARCHAR NOT NULL,
    token_id    VARCHAR,
    origin      VARCHAR,                    -- the file name this team gave (?name=)
    created_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (dataset_id, team)
);
