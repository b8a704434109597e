-- Pre-aggregates of one settled shard's accepted attempt (schema_v3.sql), with the
-- definitions of the `stage_summary_measured` view (sql/views/) restricted to one shard:
-- SLO check per request, steady window [first send, last send] when n >= 2c + 1 (else
-- the whole span), completions inside it, Little's-law busy time (macros: sql/macros.sql).
-- Parameters: $run_id, $shard_id.
INSERT INTO shard_summaries
WITH req AS (
    SELECT
        r.*,
        epoch_us(r.sent_at)                              AS sent_us,
        epoch_us(coalesce(r.end_at, r.sent_at))          AS end_us,
        slo_defined(s.ttft_ms, s.tpot_ms, s.e2e_ms)     AS has_slo,
        slo_met(r.status, r.load_kind, r.ttft_ms, r.ttft_from_intent_ms, r.tpot_ms, r.e2e_ms,
                r.e2e_from_intent_ms, s.ttft_ms, s.tpot_ms, s.e2e_ms) AS met_slo
    FROM requests AS r
    LEFT JOIN slos AS s ON s.run_id = r.run_id
    WHERE r.run_id = $run_id AND r.shard_id = $shard_id
),
w AS (
    SELECT min(sent_us)                                                AS w_start,
           steady_window_end_us(count(*), any_value(concurrency), min(sent_us), max(sent_us),
                                max(end_us))                           AS w_end,
           steady_window(count(*), any_value(concurrency), min(sent_us), max(sent_us)) AS steady,
           max(end_us) - min(sent_us)                                  AS span_us
    FROM req
)
SELECT
    $run_id, $shard_id, any_value(q.attempt), any_value(q.stage), any_value(q.provider),
    any_value(q.region), any_value(q.concurrency),
    string_agg(DISTINCT q.load_kind, ',' ORDER BY q.load_kind),
    count(*),
    count(*) FILTER (q.status = 'ok'),
    count(*) FILTER (q.status = 'error'),
    count(q.ttft_ms) FILTER (q.status = 'ok'),
    count(q.tpot_ms) FILTER (q.status = 'ok'),
    count(q.e2e_ms) FILTER (q.status = 'ok'),
    count(q.ttft_from_intent_ms) FILTER (q.status = 'ok' AND q.load_kind = 'open'),
    count(q.e2e_from_intent_ms) FILTER (q.status = 'ok' AND q.load_kind = 'open'),
    count(q.decode_tok_s) FILTER (q.status = 'ok'),
    sum(q.decode_tok_s) FILTER (q.status = 'ok'),
    -- NULL when a successful request's prompt count is unknown (as the view does).
    CASE WHEN count(*) FILTER (q.status = 'ok' AND q.prompt_tokens IS NULL) = 0
         THEN sum(q.prompt_tokens) FILTER (q.status = 'ok') END,
    sum(q.completion_tokens) FILTER (q.status = 'ok'),
    bool_or(q.has_slo),
    count(*) FILTER (q.met_slo),
    any_value(w.steady),
    any_value(w.w_end - w.w_start),
    any_value(w.span_us),
    count(*) FILTER (in_window(q.end_us, w.w_start, w.w_end)),
    count(*) FILTER (q.status = 'ok' AND in_window(q.end_us, w.w_start, w.w_end)),
    count(*) FILTER (q.met_slo AND in_window(q.end_us, w.w_start, w.w_end)),
    CASE WHEN count(*) FILTER (q.status = 'ok' AND q.prompt_tokens IS NULL
                               AND in_window(q.end_us, w.w_start, w.w_end)) = 0
         THEN sum(q.prompt_tokens) FILTER (q.status = 'ok'
                                           AND in_window(q.end_us, w.w_start, w.w_end)) END,
    sum(q.completion_tokens) FILTER (q.status = 'ok' AND in_window(q.end_us, w.w_start, w.w_end)),
    sum(busy_in_window_us(q.sent_us, q.end_us, w.w_start, w.w_end)),
    -- schema v20: the prompt tokens successful requests read from the server's cache.
    sum(q.cached_tokens) FILTER (q.status = 'ok')
FROM req AS q, w
HAVING count(*) > 0
