-- Images per provider × stage × region of one run (workload.images), over successful
-- requests: how many carried images and their share (%), images and encoded bytes per
-- image request, the image tokens the server reported apart (NULL where it reports
-- none), and the text prompt tokens where they are known: every request without
-- images, and those with images whose server reported the image tokens (subtracted).
-- Parameters: $run_id.
SELECT
    provider, stage, region,
    count(*) FILTER (n_images > 0)                                  AS image_requests,
    100 * avg(CASE WHEN n_images > 0 THEN 1 ELSE 0 END)             AS image_share_pct,
    avg(n_images) FILTER (n_images > 0)                             AS images_per_request_mean,
    avg(image_bytes) FILTER (n_images > 0)                          AS image_bytes_mean,
    avg(image_prompt_tokens) FILTER (n_images > 0)                  AS image_tokens_mean,
    avg(prompt_tokens - coalesce(image_prompt_tokens, 0))
        FILTER (coalesce(prompt_count_source = 'usage', token_count_source = 'usage')
                AND prompt_tokens IS NOT NULL
                AND (n_images = 0 OR image_prompt_tokens IS NOT NULL)) AS text_prompt_tokens_mean
FROM (
    SELECT *, coalesce(images, 0) AS n_images
    FROM requests
    WHERE run_id = $run_id AND status = 'ok'
)
GROUP BY provider, stage, region
