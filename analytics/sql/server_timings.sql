-- TTFT decomposition per stage and provider (docs/metrics.md, "Server timings"): server
-- queue, server prefill and network + client, p50 and p99 of each in ms over the
-- successful requests whose server timings are known; `joined` of `requests` had them.
SELECT
    stage,
    provider,
    count(*) AS requests,
    count(server_ttft_ns) AS joined,
    count(server_ttft_ns) / count(*) AS joined_share,
    quantile_cont(server_queue_ns, 0.5) / 1e6 AS queue_p50_ms,
    quantile_cont(server_queue_ns, 0.99) / 1e6 AS queue_p99_ms,
    quantile_cont(server_prefill_ns, 0.5) / 1e6 AS prefill_p50_ms,
    quantile_cont(server_prefill_ns, 0.99) / 1e6 AS prefill_p99_ms,
    quantile_cont(network_client_ns, 0.5) / 1e6 AS network_client_p50_ms,
    quantile_cont(network_client_ns, 0.99) / 1e6 AS network_client_p99_ms,
    quantile_cont(client_ttft_ns, 0.5) / 1e6 AS client_ttft_p50_ms
FROM request_server_timings
WHERE run_id = $run_id AND status = 'ok' AND client_ttft_ns IS NOT NULL
GROUP BY stage, provider
ORDER BY stage, provider
