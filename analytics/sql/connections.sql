-- Connections and ids per provider × stage × region of one run (docs/metrics.md,
-- "Connection phases" and "Response and request ids"): requests on a connection they
-- opened and on a reused one; DNS, TCP connect and TLS of the new ones (p50/p99 ms, over
-- the connections that had the phase); TTFT of successful first-on-connection requests
-- and of the rest; the share of all records carrying the response's own id and a
-- request id header. Parameters: $run_id.
SELECT
    provider, stage, region,
    count(*)                                                          AS records_total,
    count(*) FILTER (connection_new)                                  AS connections_new,
    count(*) FILTER (NOT connection_new)                              AS connections_reused,
    quantile_cont(dns_ns / 1e6, 0.5) FILTER (connection_new)          AS dns_p50_ms,
    quantile_cont(dns_ns / 1e6, 0.99) FILTER (connection_new)         AS dns_p99_ms,
    quantile_cont(connect_ns / 1e6, 0.5) FILTER (connection_new)      AS connect_p50_ms,
    quantile_cont(connect_ns / 1e6, 0.99) FILTER (connection_new)     AS connect_p99_ms,
    quantile_cont(tls_ns / 1e6, 0.5) FILTER (connection_new)          AS tls_p50_ms,
    quantile_cont(tls_ns / 1e6, 0.99) FILTER (connection_new)         AS tls_p99_ms,
    quantile_cont(ttft_ms, 0.5) FILTER (status = 'ok' AND connection_new)      AS ttft_new_p50_ms,
    quantile_cont(ttft_ms, 0.99) FILTER (status = 'ok' AND connection_new)     AS ttft_new_p99_ms,
    quantile_cont(ttft_ms, 0.5) FILTER (status = 'ok' AND NOT connection_new)  AS ttft_reused_p50_ms,
    quantile_cont(ttft_ms, 0.99) FILTER (status = 'ok' AND NOT connection_new) AS ttft_reused_p99_ms,
    100.0 * count(response_id) / count(*)                             AS response_id_pct,
    100.0 * count(server_request_id) / count(*)                       AS request_id_pct
FROM requests
WHERE run_id = $run_id
GROUP BY provider, stage, region
