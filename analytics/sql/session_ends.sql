-- Multi-turn sessions per provider × stage × region of one run (docs/workloads.md): how
-- many ran, their mean turns sent and planned, and how they ended (`session_end` of
-- their last turn: done, error, context_cap, stage_end; `unended`: stopped while
-- waiting for their next turn). A session is (provider, stage, region, session_id).
-- Parameters: $run_id.
WITH sessions AS (
    SELECT
        provider, stage, region, session_id,
        count(*)                                         AS turns_sent,
        max(session_turns)                               AS turns_planned,
        max(session_end)                                 AS ended
    FROM requests
    WHERE run_id = $run_id AND session_id IS NOT NULL
    GROUP BY provider, stage, region, session_id
)
SELECT
    provider, stage, region,
    count(*)                                             AS sessions,
    avg(turns_sent)                                      AS turns_mean,
    avg(turns_planned)                                   AS turns_planned_mean,
    count(*) FILTER (ended = 'done')                     AS ended_done,
    count(*) FILTER (ended = 'error')                    AS ended_error,
    count(*) FILTER (ended = 'context_cap')              AS ended_context_cap,
    count(*) FILTER (ended = 'stage_end')                AS ended_stage_end,
    count(*) FILTER (ended IS NULL)                      AS unended
FROM sessions
GROUP BY provider, stage, region
ORDER BY stage, provider, region
