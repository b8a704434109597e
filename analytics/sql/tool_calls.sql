-- Tool calls per provider × stage × region of one run (workload.tools): the successful
-- requests that carried tools, the share of those answered with a tool call (%), and
-- the median time from send to the first tool-call delta. Parameters: $run_id.
SELECT
    provider, stage, region,
    count(*) FILTER (tools_offered)                                     AS tool_requests,
    100 * avg(CASE WHEN tool_call THEN 1 ELSE 0 END) FILTER (tools_offered) AS tool_call_pct,
    quantile_cont(tool_call_at_ns / 1e6, 0.5) FILTER (tool_call)        AS tool_call_p50_ms
FROM requests
WHERE run_id = $run_id AND status = 'ok'
GROUP BY provider, stage, region
