-- Per provider × stage × region of one run: counts, errors by class, latency percentiles,
-- decode speed and aggregate throughput. Percentiles use linear interpolation
-- (quantile_cont, numpy's default) over successful requests only (DOMAIN §1).
-- Parameters: $run_id.
WITH req AS (
    SELECT * FROM requests WHERE run_id = $run_id
),
main AS (
    SELECT
        provider, stage, region,
        any_value(concurrency)                                   AS concurrency,
        count(*)                                                 AS requests,
        count(*) FILTER (status = 'ok')                          AS ok,
        count(*) FILTER (status = 'error')                       AS errors,
        quantile_cont(ttft_ms, 0.50) FILTER (status = 'ok')      AS ttft_p50_ms,
        quantile_cont(ttft_ms, 0.95) FILTER (status = 'ok')      AS ttft_p95_ms,
        quantile_cont(ttft_ms, 0.99) FILTER (status = 'ok')      AS ttft_p99_ms,
        quantile_cont(tpot_ms, 0.50) FILTER (status = 'ok')      AS tpot_p50_ms,
        quantile_cont(e2e_ms, 0.99) FILTER (status = 'ok')       AS e2e_p99_ms,
        quantile_cont(decode_tok_s, 0.50) FILTER (status = 'ok') AS decode_tok_s_p50,
        sum(completion_tokens) FILTER (status = 'ok')            AS output_tokens
    FROM req
    GROUP BY provider, stage, region
),
gaps AS (
    SELECT provider, stage, region, unnest(itl_ns) AS gap_ns
    FROM req
    WHERE status = 'ok'
),
itl AS (
    SELECT
        provider, stage, region,
        quantile_cont(gap_ns, 0.50) / 1e6 AS itl_p50_ms,
        quantile_cont(gap_ns, 0.99) / 1e6 AS itl_p99_ms
    FROM gaps
    GROUP BY provider, stage, region
),
error_counts AS (
    SELECT provider, stage, region, error_class, count(*) AS n
    FROM req
    WHERE status = 'error'
    GROUP BY provider, stage, region, error_class
),
errs AS (
    SELECT provider, stage, region,
           string_agg(error_class || '=' || n, ', ' ORDER BY error_class) AS errors_by_class
    FROM error_counts
    GROUP BY provider, stage, region
),
-- Throughput window per shard: a shard runs in one process, whose wall-clock instants are
-- derived from one perf_counter anchor, so their differences are perf_counter durations.
shard_span AS (
    SELECT
        provider, stage, region, shard_id,
        sum(completion_tokens) FILTER (status = 'ok')             AS output_tokens,
        epoch_us(max(end_at)) - epoch_us(min(sent_at))            AS span_us
    FROM req
    GROUP BY provider, stage, region, shard_id
),
throughput AS (
    SELECT provider, stage, region,
           sum(output_tokens * 1e6 / nullif(span_us, 0)) AS output_tok_s
    FROM shard_span
    GROUP BY provider, stage, region
)
SELECT
    m.provider, m.stage, m.region, m.concurrency, m.requests, m.ok, m.errors,
    coalesce(e.errors_by_class, '')  AS errors_by_class,
    m.ttft_p50_ms, m.ttft_p95_ms, m.ttft_p99_ms,
    i.itl_p50_ms, i.itl_p99_ms,
    m.tpot_p50_ms, m.e2e_p99_ms, m.decode_tok_s_p50,
    t.output_tok_s
FROM main AS m
LEFT JOIN itl AS i USING (provider, stage, region)
LEFT JOIN errs AS e USING (provider, stage, region)
LEFT JOIN throughput AS t USING (provider, stage, region)
ORDER BY m.provider, m.stage, m.region
