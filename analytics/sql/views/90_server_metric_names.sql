-- Server telemetry (docs/telemetry.md). `server_metric_names`: the exposed sample names
-- workers keep and the canonical figure each is (scenarios/wire/server_metrics.py NAME_MAP; a
-- unit test keeps the two equal), with the factor to canonical units and how the series
-- of one scrape combine (`sum` for counts, `avg` for shares).
CREATE OR REPLACE VIEW server_metric_names AS
SELECT source, metric, canonical, CAST(scale AS DOUBLE) AS scale, combine FROM (VALUES
    ('vllm', 'vllm:num_requests_running', 'running_requests', 1.0, 'sum'),
    ('vllm', 'vllm:num_requests_waiting', 'waiting_requests', 1.0, 'sum'),
    ('vllm', 'vllm:kv_cache_usage_perc', 'kv_cache_usage', 1.0, 'avg'),
    ('vllm', 'vllm:gpu_cache_usage_perc', 'kv_cache_usage', 1.0, 'avg'),
    ('vllm', 'vllm:prompt_tokens_total', 'prompt_tokens_total', 1.0, 'sum'),
    ('vllm', 'vllm:generation_tokens_total', 'generation_tokens_total', 1.0, 'sum'),
    ('vllm', 'vllm:prefix_cache_queries_total', 'prefix_cache_queries_total', 1.0, 'sum'),
    ('vllm', 'vllm:prefix_cache_hits_total', 'prefix_cache_hits_total', 1.0, 'sum'),
    ('vllm', 'vllm:gpu_prefix_cache_queries_total', 'prefix_cache_queries_total', 1.0, 'sum'),
    ('vllm', 'vllm:gpu_prefix_cache_hits_total', 'prefix_cache_hits_total', 1.0, 'sum'),
    ('vllm', 'vllm:gpu_prefix_cache_hit_rate', 'prefix_cache_hit_rate', 1.0, 'avg'),
    ('vllm', 'vllm:spec_decode_num_drafts_total', 'spec_drafts_total', 1.0, 'sum'),
    ('vllm', 'vllm:spec_decode_num_draft_tokens_total', 'spec_draft_tokens_total', 1.0, 'sum'),
    ('vllm', 'vllm:spec_decode_num_accepted_tokens_total', 'spec_accepted_tokens_total', 1.0,
     'sum'),
    ('sglang', 'sglang:num_running_reqs', 'running_requests', 1.0, 'sum'),
    ('sglang', 'sglang:num_queue_reqs', 'waiting_requests', 1.0, 'sum'),
    ('sglang', 'sglang:token_usage', 'kv_cache_usage', 1.0, 'avg'),
    ('sglang', 'sglang:prompt_tokens_total', 'prompt_tokens_total', 1.0, 'sum'),
    ('sglang', 'sglang:generation_tokens_total', 'generation_tokens_total', 1.0, 'sum'),
    ('sglang', 'sglang:cache_hit_rate', 'prefix_cache_hit_rate', 1.0, 'avg'),
    ('sglang', 'sglang:spec_accept_rate', 'spec_accept_rate', 1.0, 'avg'),
    ('sglang', 'sglang:spec_accept_length', 'spec_accept_length', 1.0, 'avg'),
    ('tgi', 'tgi_batch_current_size', 'running_requests', 1.0, 'sum'),
    ('tgi', 'tgi_queue_size', 'waiting_requests', 1.0, 'sum'),
    ('tgi', 'tgi_request_input_length_sum', 'prompt_tokens_total', 1.0, 'sum'),
    ('tgi', 'tgi_request_generated_tokens_sum', 'generation_tokens_total', 1.0, 'sum'),
    ('llamacpp', 'llamacpp:requests_processing', 'running_requests', 1.0, 'sum'),
    ('llamacpp', 'llamacpp:requests_deferred', 'waiting_requests', 1.0, 'sum'),
    ('llamacpp', 'llamacpp:kv_cache_usage_ratio', 'kv_cache_usage', 1.0, 'avg'),
    ('llamacpp', 'llamacpp:prompt_tokens_total', 'prompt_tokens_total', 1.0, 'sum'),
    ('llamacpp', 'llamacpp:tokens_predicted_total', 'generation_tokens_total', 1.0, 'sum'),
    ('dcgm', 'DCGM_FI_DEV_GPU_UTIL', 'gpu_utilization', 0.01, 'avg'),
    ('dcgm', 'DCGM_FI_DEV_FB_USED', 'gpu_memory_used_bytes', 1048576.0, 'sum'),
    ('dcgm', 'DCGM_FI_DEV_POWER_USAGE', 'gpu_power_watts', 1.0, 'sum'),
    ('dcgm', 'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION', 'gpu_energy_joules_total', 0.001, 'sum')
) AS names(source, metric, canonical, scale, combine);
