-- upstream_attempts: each entry of a failover run's upstream logs (upstream_requests,
-- scenario.upstreams) matched to the request that caused it, one row per attempt the
-- gateway made. Matched by the id the client sent (header x-tokenbench-request or the
-- body's user, as the upstream received it), else - for an entry that arrived without
-- one - by the prompt hash where exactly one accepted request of the run has that
-- prompt. `try` numbers a request's attempts from 1 in the order the upstreams received
-- them (one machine's wall clock). docs/failover.md, "Attribution".
CREATE OR REPLACE VIEW upstream_attempts AS
WITH tagged AS (
    SELECT run_id, shard_id, attempt, seq, client_request_id, prompt_hash
    FROM requests WHERE client_request_id IS NOT NULL
),
unique_prompts AS (
    SELECT run_id, prompt_hash FROM tagged GROUP BY run_id, prompt_hash HAVING count(*) = 1
),
matched AS (
    SELECT t.run_id, t.shard_id, t.attempt, t.seq, u.upstream, u.seq AS upstream_seq,
           u.received_at, u.status, u.outcome, u.stall_ms, 'id' AS matched_by
    FROM upstream_requests AS u
    JOIN tagged AS t ON t.run_id = u.run_id AND t.client_request_id = u.request_id
    UNION ALL
    SELECT t.run_id, t.shard_id, t.attempt, t.seq, u.upstream, u.seq AS upstream_seq,
           u.received_at, u.status, u.outcome, u.stall_ms, 'prompt' AS matched_by
    FROM upstream_requests AS u
    JOIN unique_prompts AS p ON p.run_id = u.run_id AND p.prompt_hash = u.prompt_hash
    JOIN tagged AS t ON t.run_id = u.run_id AND t.prompt_hash = u.prompt_hash
    WHERE u.request_id IS NULL
)
SELECT
    *,
    row_number() OVER (
        PARTITION BY run_id, shard_id, attempt, seq ORDER BY received_at, upstream, upstream_seq
    ) AS try
FROM matched;

-- request_upstreams: every request of a failover run with what its upstreams saw:
-- `upstream_attempts` (the upstreams it reached, in order), `attempt_outcomes` (how each
-- answered), `tries`, `served_by` (the last upstream that answered 200: the stream the
-- client got, whole or cut), `fell_back` (the first attempt failed and a later one was
-- answered 200: a fallback to another upstream or a retry of the same one) and
-- `failover_ms` (from the first attempt's arrival to the serving one's). A request that
-- no entry matched has tries 0 (e.g. a gateway that failed it without asking upstream).
CREATE OR REPLACE VIEW request_upstreams AS
WITH per_request AS (
    SELECT
        run_id, shard_id, attempt, seq,
        list(upstream ORDER BY try)                                  AS upstream_attempts,
        list(outcome ORDER BY try)                                   AS attempt_outcomes,
        count(*)                                                     AS tries,
        arg_max(upstream, try) FILTER (status = 200)                 AS served_by,
        max(try) FILTER (status = 200)                               AS served_try,
        min(received_at)                                             AS first_received_at,
        arg_max(received_at, try) FILTER (status = 200)              AS served_received_at,
        bool_or(try = 1 AND status <> 200)                           AS first_failed,
        min(matched_by)                                              AS matched_by
    FROM upstream_attempts
    GROUP BY run_id, shard_id, attempt, seq
)
SELECT
    r.*,
    a.upstream_attempts,
    a.attempt_outcomes,
    coalesce(a.tries, 0)                                             AS tries,
    a.served_by,
    coalesce(a.first_failed AND a.served_try > 1, false)             AS fell_back,
    CASE WHEN a.first_failed AND a.served_try > 1
         THEN epoch_us(a.served_received_at - a.first_received_at) / 1e3 END AS failover_ms,
    a.matched_by
FROM requests AS r
LEFT JOIN per_request AS a USING (run_id, shard_id, attempt, seq)
WHERE r.client_request_id IS NOT NULL;
