-- The spend ledger (docs/teams.md, "Budgets and the spend ledger"): what each team spent
-- per UTC day and token-priced provider, over its runs, from recorded usage x list price
-- (the control plane upserts `spend_ledger` from the records while a run goes).
CREATE OR REPLACE VIEW spend_by_day AS
SELECT team, day, provider,
       count(DISTINCT run_id)  AS runs,
       sum(input_tokens)       AS input_tokens,
       sum(output_tokens)      AS output_tokens,
       sum(usd)                AS usd
FROM spend_ledger
GROUP BY team, day, provider;
