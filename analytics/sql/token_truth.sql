-- Token truth per provider × stage × region of one run (docs/metrics.md, "Token counts"),
-- over successful requests: how many have no prompt count (the server reported none and
-- the workload has no tokenizer), how many were counted with the workload's tokenizer,
-- why the answers ended (finish reasons with their counts, most frequent first) and the
-- mean planned and received output tokens. Parameters: $run_id.
WITH ok AS (
    SELECT * FROM requests WHERE run_id = $run_id AND status = 'ok'
),
reasons AS (
    SELECT provider, stage, region, finish_reason, count(*) AS n
    FROM ok
    WHERE finish_reason IS NOT NULL
    GROUP BY ALL
),
reason_list AS (
    SELECT provider, stage, region,
           string_agg(finish_reason || '=' || n, ', ' ORDER BY n DESC, finish_reason)
                                                                       AS finish_reasons
    FROM reasons
    GROUP BY ALL
)
SELECT
    o.provider, o.stage, o.region,
    count(*) FILTER (o.prompt_tokens IS NULL)                          AS prompt_tokens_unknown,
    count(*) FILTER (o.prompt_count_source = 'tokenizer')              AS prompt_tokens_counted,
    any_value(l.finish_reasons)                                        AS finish_reasons,
    avg(o.planned_output_tokens)                                       AS output_tokens_planned_mean,
    avg(o.completion_tokens)                                           AS output_tokens_mean
FROM ok AS o
LEFT JOIN reason_list AS l USING (provider, stage, region)
GROUP BY o.provider, o.stage, o.region
