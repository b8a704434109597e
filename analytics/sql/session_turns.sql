-- Multi-turn sessions by turn, per provider × stage × region × turn of one run
-- (docs/workloads.md): the turns sent and how many succeeded, TTFT p50/p99 and ITL p50
-- over successful turns (quantile_cont: numpy's linear interpolation), the mean context
-- tokens sent with the turn (earlier turns' tokens) and the mean server-reported prompt
-- tokens. A prefix cache shows here: later turns carry more context but prefill only
-- what is new. Parameters: $run_id.
WITH turns AS (
    SELECT
        provider, stage, region, turn,
        count(*)                                                  AS requests,
        count(*) FILTER (status = 'ok')                           AS ok,
        quantile_cont(ttft_ms, 0.5) FILTER (status = 'ok')        AS ttft_p50_ms,
        quantile_cont(ttft_ms, 0.99) FILTER (status = 'ok')       AS ttft_p99_ms,
        avg(context_tokens)                                       AS context_tokens_mean,
        avg(prompt_tokens) FILTER (status = 'ok')                 AS prompt_tokens_mean
    FROM requests
    WHERE run_id = $run_id AND turn IS NOT NULL
    GROUP BY provider, stage, region, turn
),
gaps AS (
    SELECT provider, stage, region, turn, quantile_cont(gap_ns, 0.5) / 1e6 AS itl_p50_ms
    FROM (
        SELECT provider, stage, region, turn, unnest(itl_ns) AS gap_ns
        FROM requests
        WHERE run_id = $run_id AND turn IS NOT NULL AND status = 'ok'
    )
    GROUP BY provider, stage, region, turn
)
SELECT t.*, g.itl_p50_ms
FROM turns AS t
LEFT JOIN gaps AS g USING (provider, stage, region, turn)
ORDER BY stage, provider, region, turn
