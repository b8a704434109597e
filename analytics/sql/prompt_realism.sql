-- Prompt-length realism per provider × stage × region of one run: the planned prompt
-- length against the server-reported one (requests whose prompt count came from `usage`;
-- rows before schema v11 say so in `token_count_source`; a count made with the workload's
-- tokenizer, or none at all, is not a report),
-- after warm-up: requests sent while the shard was still calibrating from the server
-- (`planned_prompt_source = 'warmup'`, docs/lengths.md) have their own error. The rest
-- of the difference is the chat template, and a tokenizer disagreeing with the plan.
-- Reported means text tokens: image tokens are subtracted where the server reports them
-- apart, and requests with images whose server does not are left out (workload.images).
-- Parameters: $run_id.
SELECT
    provider, stage, region,
    avg(planned_prompt_tokens) FILTER (steady)                          AS prompt_tokens_planned_mean,
    avg(prompt_tokens) FILTER (steady AND reported)                     AS prompt_tokens_reported_mean,
    100 * avg((prompt_tokens - planned_prompt_tokens) / planned_prompt_tokens)
        FILTER (steady AND reported)                                    AS prompt_length_error_pct,
    100 * avg((prompt_tokens - planned_prompt_tokens) / planned_prompt_tokens)
        FILTER (NOT steady AND reported)                                AS prompt_length_warmup_error_pct,
    count(*) FILTER (NOT steady)                                        AS prompt_warmup_requests,
    mode(planned_prompt_source) FILTER (steady)                         AS prompt_length_source,
    avg(prompt_tokens_per_word) FILTER (steady)                         AS prompt_tokens_per_word,
    avg(prompt_template_tokens) FILTER (steady)                         AS prompt_template_tokens
FROM (
    SELECT * REPLACE (prompt_tokens - coalesce(image_prompt_tokens, 0) AS prompt_tokens),
           coalesce(planned_prompt_source, '') <> 'warmup' AS steady,
           coalesce(prompt_count_source = 'usage',
                    token_count_source = 'usage' AND prompt_tokens IS NOT NULL)
               AND (coalesce(images, 0) = 0 OR image_prompt_tokens IS NOT NULL) AS reported
    FROM requests
    WHERE run_id = $run_id AND status = 'ok'
)
GROUP BY provider, stage, region
