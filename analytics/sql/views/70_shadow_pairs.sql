-- shadow_pairs: one row per sampled request × shadow provider × region, beside the
-- primary's record of the same request (joined on request_key). Deltas are shadow −
-- primary, so a negative delta means the shadow was faster. A shadow task delivered
-- twice (a worker died before acknowledging it) leaves two records: the first to end
-- is kept. Both sides come from the `requests` view (accepted attempts, metrics in ms).
-- Shadow sessions: docs/shadow.md.
CREATE OR REPLACE VIEW shadow_pairs AS
WITH primary_side AS (
    SELECT * FROM requests WHERE load_kind = 'live' AND request_key IS NOT NULL
),
shadow_side AS (
    SELECT * FROM requests WHERE load_kind = 'shadow' AND request_key IS NOT NULL
    QUALIFY row_number() OVER (
        PARTITION BY run_id, request_key, provider, region ORDER BY end_at, worker) = 1
)
SELECT
    s.run_id, s.request_key, p.seq,
    p.provider                              AS primary_provider,
    p.region                                AS primary_region,
    s.provider                              AS shadow_provider,
    s.region                                AS shadow_region,
    p.sent_at                               AS primary_sent_at,
    s.sent_at                               AS shadow_sent_at,
    p.status                                AS primary_status,
    s.status                                AS shadow_status,
    p.error_class                           AS primary_error_class,
    s.error_class                           AS shadow_error_class,
    p.ttft_ms                               AS primary_ttft_ms,
    s.ttft_ms                               AS shadow_ttft_ms,
    s.ttft_ms - p.ttft_ms                   AS ttft_delta_ms,
    p.e2e_ms                                AS primary_e2e_ms,
    s.e2e_ms                                AS shadow_e2e_ms,
    s.e2e_ms - p.e2e_ms                     AS e2e_delta_ms,
    p.prompt_tokens                         AS primary_prompt_tokens,
    s.prompt_tokens                         AS shadow_prompt_tokens,
    p.completion_tokens                     AS primary_completion_tokens,
    s.completion_tokens                     AS shadow_completion_tokens,
    s.completion_tokens - p.completion_tokens AS completion_tokens_delta,
    s.prompt_tokens - p.prompt_tokens       AS prompt_tokens_delta,
    p.token_count_source                    AS primary_token_count_source,
    s.token_count_source                    AS shadow_token_count_source
FROM shadow_side AS s
JOIN primary_side AS p USING (run_id, request_key);
