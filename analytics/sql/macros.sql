-- The report's formulas, each written once: DuckDB macros that the views (sql/views/) and
-- the queries on stored pre-aggregates (shard_summary.sql when a shard settles,
-- stored_summary.sql for a large run's report) share, so both paths give the same figures.
-- (Re)created before the views on every read-write connect (analytics/store/views.py). DuckDB
-- checks that a macro's callees exist when it is created: a macro follows those it calls.
-- Definitions: docs/analytics.md ("Steady-state window", "SLO check per request", "Cost").

-- Steady-state window (per shard) -------------------------------------------------------

-- Steady when the shard has n >= 2c + 1 requests (c: the concurrency its worker drives)
-- sent over a positive span: then at least c + 1 of them complete before the last send,
-- whatever the ramp-up.
CREATE OR REPLACE MACRO steady_window(requests, concurrency, first_send_us, last_send_us) AS
    requests >= 2 * concurrency + 1 AND last_send_us > first_send_us;

-- The window starts at the first send and ends at the last send when steady (after it no
-- new request starts, so the drain is excluded), else at the last end (the whole span).
CREATE OR REPLACE MACRO steady_window_end_us(
    requests, concurrency, first_send_us, last_send_us, last_end_us
) AS
    CASE WHEN steady_window(requests, concurrency, first_send_us, last_send_us)
         THEN last_send_us ELSE last_end_us END;

-- A request counts in the window's rates when it completes inside it.
CREATE OR REPLACE MACRO in_window(end_us, w_start_us, w_end_us) AS
    end_us BETWEEN w_start_us AND w_end_us;

-- Little's law: the mean number of requests in flight is their time in flight inside the
-- window over the window.
CREATE OR REPLACE MACRO busy_in_window_us(sent_us, end_us, w_start_us, w_end_us) AS
    greatest(0, least(end_us, w_end_us) - greatest(sent_us, w_start_us));
CREATE OR REPLACE MACRO mean_in_flight(busy_us, window_us) AS busy_us / nullif(window_us, 0);

-- A count in the window per second of it.
CREATE OR REPLACE MACRO per_window_s(n, window_us) AS n * 1e6 / nullif(window_us, 0);

-- SLO attainment --------------------------------------------------------------------------

-- Whether the run has an objective at all (without one, goodput and attainment are NULL).
CREATE OR REPLACE MACRO slo_defined(slo_ttft_ms, slo_tpot_ms, slo_e2e_ms) AS
    slo_ttft_ms IS NOT NULL OR slo_tpot_ms IS NOT NULL OR slo_e2e_ms IS NOT NULL;

-- A request meets the SLO when it succeeded and every objective holds (NULL: none on that
-- metric). Open loop is judged from intent: it includes the queueing a user would see. A
-- one-token answer has no TPOT and cannot miss a TPOT objective.
CREATE OR REPLACE MACRO slo_met(
    status, load_kind, ttft_ms, ttft_from_intent_ms, tpot_ms, e2e_ms, e2e_from_intent_ms,
    slo_ttft_ms, slo_tpot_ms, slo_e2e_ms
) AS
    status = 'ok'
    AND (slo_ttft_ms IS NULL OR (CASE WHEN load_kind = 'open'
                                      THEN ttft_from_intent_ms ELSE ttft_ms END) <= slo_ttft_ms)
    AND (slo_tpot_ms IS NULL OR coalesce(tpot_ms <= slo_tpot_ms, true))
    AND (slo_e2e_ms IS NULL OR (CASE WHEN load_kind = 'open'
                                     THEN e2e_from_intent_ms ELSE e2e_ms END) <= slo_e2e_ms);

-- % of all requests (failures count as misses) that met the SLO; NULL without one.
CREATE OR REPLACE MACRO slo_attainment_pct(has_slo, met_slo, requests) AS
    CASE WHEN has_slo THEN 100.0 * met_slo / requests END;

-- Requests per second completing in the window that met the SLO; NULL without one.
CREATE OR REPLACE MACRO goodput_rps(has_slo, good_per_s) AS
    CASE WHEN has_slo THEN good_per_s END;

-- Cost --------------------------------------------------------------------------------------

-- Pricing wins when the provider has one (it is what is billed); otherwise the GPU-hours
-- of its deployment, spread over what it served at the load measured.
CREATE OR REPLACE MACRO cost_basis(input_per_mtok, gpu_hour_usd, gpus) AS
    CASE WHEN input_per_mtok IS NOT NULL THEN 'api'
         WHEN gpu_hour_usd IS NOT NULL AND gpus IS NOT NULL THEN 'gpu_hour' END;

-- H: what a self-hosted deployment costs per hour (USD).
CREATE OR REPLACE MACRO deployment_usd_per_hour(gpu_hour_usd, gpus) AS gpu_hour_usd * gpus;

-- The list price of a stage's prompt tokens (USD per 1M) once the share the provider
-- read from its prompt cache is billed at its cached-input price (docs/analytics.md,
-- "Cost"): NULL without an input price; the input price when the provider lists no
-- cached price or the stage's cached or prompt tokens are unknown.
CREATE OR REPLACE MACRO effective_input_per_mtok(
    input_per_mtok, cached_input_per_mtok, input_tokens, cached_tokens
) AS
    CASE WHEN input_per_mtok IS NULL THEN NULL
         WHEN cached_input_per_mtok IS NULL OR cached_tokens IS NULL
              OR coalesce(input_tokens, 0) <= 0 THEN input_per_mtok
         ELSE (input_per_mtok * (input_tokens - least(cached_tokens, input_tokens))
               + cached_input_per_mtok * least(cached_tokens, input_tokens))
              / input_tokens END;

-- What tokens cost at list prices (USD per 1M tokens).
CREATE OR REPLACE MACRO list_cost_usd(input_tokens, output_tokens, input_per_mtok, output_per_mtok) AS
    (input_tokens * input_per_mtok + output_tokens * output_per_mtok) / 1e6;

-- The prompt tokens a request is billed for (the spend ledger, docs/teams.md): what the
-- server reported; an answered request without a count, its planned prompt; else none.
CREATE OR REPLACE MACRO billed_prompt_tokens(prompt_tokens, planned_prompt_tokens, status) AS
    coalesce(prompt_tokens, CASE WHEN status = 'ok' THEN planned_prompt_tokens ELSE 0 END);

-- The mean list price of prompt and completion tokens together (USD per 1M tokens).
CREATE OR REPLACE MACRO blended_usd_per_mtok(
    input_tokens, output_tokens, input_per_mtok, output_per_mtok
) AS
    (input_tokens * input_per_mtok + output_tokens * output_per_mtok)
        / nullif(input_tokens + output_tokens, 0);

-- USD per 1M tokens of one kind: its list price, or H over that kind's throughput (each
-- kind charged the whole GPU-hour: alternative views, not additive).
CREATE OR REPLACE MACRO cost_per_mtok(input_per_mtok, list_price, gpu_hour_usd, gpus, tok_s) AS
    CASE WHEN input_per_mtok IS NOT NULL THEN list_price
         ELSE deployment_usd_per_hour(gpu_hour_usd, gpus) / (tok_s * 3600) * 1e6 END;

-- USD per 1,000 successful requests.
CREATE OR REPLACE MACRO cost_per_1k_requests(
    input_per_mtok, output_per_mtok, gpu_hour_usd, gpus,
    input_tokens, output_tokens, ok, ok_request_rate
) AS
    CASE WHEN input_per_mtok IS NOT NULL
         THEN list_cost_usd(input_tokens, output_tokens, input_per_mtok, output_per_mtok)
              / nullif(ok, 0) * 1000
         ELSE deployment_usd_per_hour(gpu_hour_usd, gpus) / (ok_request_rate * 3600) * 1000 END;

-- USD the stage cost: its tokens at list prices, or H over its span.
CREATE OR REPLACE MACRO cost_usd(
    input_per_mtok, output_per_mtok, gpu_hour_usd, gpus, input_tokens, output_tokens, span_s
) AS
    CASE WHEN input_per_mtok IS NOT NULL
         THEN list_cost_usd(input_tokens, output_tokens, input_per_mtok, output_per_mtok)
         ELSE deployment_usd_per_hour(gpu_hour_usd, gpus) * span_s / 3600 END;

-- Every cost column of a stage row, in the order the summaries show them: one definition
-- for the stage summary of the records (views/40_stage_summary_measured.sql) and of the
-- stored pre-aggregates (stored_summary.sql), which expand it with unnest().
CREATE OR REPLACE MACRO stage_costs(
    input_per_mtok, output_per_mtok, gpu_hour_usd, gpus,
    input_tokens, output_tokens, ok, ok_request_rate, input_tok_s, output_tok_s, span_s
) AS {
    'cost_basis': cost_basis(input_per_mtok, gpu_hour_usd, gpus),
    'deployment_usd_per_hour': deployment_usd_per_hour(gpu_hour_usd, gpus),
    'cost_per_mtok_input':
        cost_per_mtok(input_per_mtok, input_per_mtok, gpu_hour_usd, gpus, input_tok_s),
    'cost_per_mtok_output':
        cost_per_mtok(input_per_mtok, output_per_mtok, gpu_hour_usd, gpus, output_tok_s),
    'cost_per_1k_requests': cost_per_1k_requests(
        input_per_mtok, output_per_mtok, gpu_hour_usd, gpus,
        input_tokens, output_tokens, ok, ok_request_rate),
    'cost_usd': cost_usd(
        input_per_mtok, output_per_mtok, gpu_hour_usd, gpus, input_tokens, output_tokens, span_s)
};
