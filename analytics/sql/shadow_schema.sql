-- Shadow-traffic sessions (docs/shadow.md): tables owned by the shadow feature, created
-- with IF NOT EXISTS when the control plane starts (outside the numbered analytics schema
-- versions, like the API's own api_scenarios table). A session is also a row of `runs`
-- (state running until stopped); its records are ordinary request_records rows.

-- One row per session: the gateway configuration it was opened with.
CREATE TABLE IF NOT EXISTS shadow_sessions (
    run_id      VARCHAR PRIMARY KEY,
    name        VARCHAR NOT NULL,
    config      JSON NOT NULL,            -- API keys appear only as env var names
    created_at  TIMESTAMPTZ NOT NULL
);

-- One row per request the gateway forwarded. Prompt text only with privacy.store_text;
-- otherwise its length and a salted SHA-256. Authorization headers are never captured.
CREATE TABLE IF NOT EXISTS shadow_captures (
    run_id         VARCHAR NOT NULL,
    request_key    VARCHAR NOT NULL,      -- also on the primary's and the shadows' records
    seq            BIGINT NOT NULL,       -- the gateway instance's request number
    gateway        VARCHAR NOT NULL,      -- gateway instance name
    received_at    TIMESTAMPTZ NOT NULL,  -- wall clock, for replay gaps and correlation
    stream         BOOLEAN NOT NULL,
    sampled        BOOLEAN NOT NULL,      -- chosen for the shadows (enqueued or dropped)
    enqueued       BOOLEAN NOT NULL,      -- handed to the shadow sender (not dropped as full)
    prompt_chars   INTEGER NOT NULL,
    prompt_sha256  VARCHAR NOT NULL,
    max_tokens     INTEGER,
    messages       JSON,                  -- NULL unless privacy.store_text
    PRIMARY KEY (run_id, request_key)
);
