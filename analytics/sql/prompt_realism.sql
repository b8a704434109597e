-- Prompt-length realism per provider × stage × region of one run: the planned prompt
-- length against the server-reported one (requests whose counts came from `usage`).
-- The difference is the chat template plus the tokenizer disagreeing with our estimate.
-- Parameters: $run_id.
SELECT
    provider, stage, region,
    avg(planned_prompt_tokens)                                          AS prompt_tokens_planned_mean,
    avg(prompt_tokens) FILTER (token_count_source = 'usage')            AS prompt_tokens_reported_mean,
    100 * avg((prompt_tokens - planned_prompt_tokens) / planned_prompt_tokens)
        FILTER (token_count_source = 'usage')                           AS prompt_length_error_pct
FROM requests
WHERE run_id = $run_id AND status = 'ok'
GROUP BY provider, stage, region
