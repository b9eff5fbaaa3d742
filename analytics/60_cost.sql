-- Cost: every call priced at its model's prices in the run config (runs.config: models[] and judge, USD per
-- 1M tokens: price_in, price_out, price_cached_in, price_cache_write, batch_discount), and what it would have
-- cost without batch mode, without prompt caching, and without either (list price).
--
-- input_tokens is the whole prompt; the part read from the prompt cache is billed at price_cached_in, the part
-- written to it (Anthropic) at price_cache_write, the rest at price_in (an unset cache price is price_in: no
-- saving is claimed that the config does not state). A call that went in a provider batch (batch_id) costs
-- (1 - batch_discount) of that (default discount 0.5: OpenAI's and Anthropic's batch APIs bill half). Calls
-- without usage (errors, expired batch requests) cost nothing: the providers bill only answered requests.
-- A model without price_in and price_out in the config has NULL costs.

CREATE OR REPLACE MACRO token_cost_usd(uncached, cache_read, cache_write, output, p_in, p_cached, p_write, p_out) AS
    (uncached * p_in + cache_read * coalesce(p_cached, p_in) + cache_write * coalesce(p_write, p_in) + output * p_out) / 1e6;

-- model_prices: the prices of each model (and judge) per run, from the stored run config.
CREATE OR REPLACE VIEW model_prices AS
WITH entries AS (
    SELECT run_id, unnest(CAST(json_extract(config, '$.models') AS JSON[])) AS m FROM runs
    UNION ALL
    SELECT run_id, json_extract(config, '$.judge') AS m FROM runs WHERE json_type(json_extract(config, '$.judge')) = 'OBJECT'
)
SELECT
    run_id,
    m ->> 'name' AS model,
    any_value(TRY_CAST(m ->> 'price_in' AS DOUBLE)) AS price_in,
    any_value(TRY_CAST(m ->> 'price_out' AS DOUBLE)) AS price_out,
    any_value(TRY_CAST(m ->> 'price_cached_in' AS DOUBLE)) AS price_cached_in,
    any_value(TRY_CAST(m ->> 'price_cache_write' AS DOUBLE)) AS price_cache_write,
    any_value(coalesce(TRY_CAST(m ->> 'batch_discount' AS DOUBLE), 0.5)) AS batch_discount
FROM entries
GROUP BY ALL;

-- call_costs: one row per call (attempt) with its tokens and four costs (NULL when the model has no price).
CREATE OR REPLACE VIEW call_costs AS
WITH c AS (
    SELECT
        c.run_id, c.episode_id, c.call_model AS model, c.env, coalesce(c.caller, 'agent') AS caller, c.turn, c.attempt,
        c.batch_id, c.http_status,
        coalesce(c.input_tokens, 0) AS input_tokens,
        coalesce(c.cache_read_tokens, 0) AS cache_read_tokens,
        coalesce(c.cache_write_tokens, 0) AS cache_write_tokens,
        coalesce(c.output_tokens, 0) AS output_tokens,
        p.price_in, p.price_out, p.price_cached_in, p.price_cache_write,
        CASE WHEN c.batch_id IS NOT NULL THEN coalesce(p.batch_discount, 0.5) ELSE 0 END AS discount,
        p.price_in IS NOT NULL OR p.price_out IS NOT NULL AS priced,
        c.config_id
    FROM calls AS c
    LEFT JOIN model_prices AS p ON p.run_id = c.run_id AND p.model = c.call_model
), priced AS (
    SELECT
        *,
        CASE WHEN priced THEN token_cost_usd(input_tokens - cache_read_tokens - cache_write_tokens, cache_read_tokens,
             cache_write_tokens, output_tokens, coalesce(price_in, 0), price_cached_in, price_cache_write, coalesce(price_out, 0)) END
            AS cost_no_batch_usd,
        CASE WHEN priced THEN token_cost_usd(input_tokens, 0, 0, output_tokens, coalesce(price_in, 0), NULL, NULL, coalesce(price_out, 0)) END
            AS cost_list_usd
    FROM c
)
SELECT
    run_id, episode_id, model, env, caller, turn, attempt, batch_id, http_status,
    input_tokens, cache_read_tokens, cache_write_tokens, output_tokens,
    discount AS batch_discount,                          -- the share of the price the call's batch saved (0: direct)
    cost_no_batch_usd * (1 - discount) AS cost_usd,      -- what was billed
    cost_no_batch_usd,                                   -- the same calls without batch mode
    cost_list_usd * (1 - discount) AS cost_no_cache_usd, -- ... without prompt caching
    cost_list_usd,                                       -- ... without either
    config_id                                            -- the deciding configuration the call ran in (calls.config_id)
FROM priced;

-- cost_by_model_env: per model (the model that served the calls: a judge has its own rows) x environment:
-- episodes with calls of that model and how many of them succeeded, tokens, the cache hit share (input tokens
-- read from the cache), the batched share of calls, the cost and what it would have been without batch mode,
-- without caching and without either; cost per episode and per successful episode.
CREATE OR REPLACE VIEW cost_by_model_env AS
WITH ep AS (SELECT DISTINCT run_id, episode_id, success FROM episodes),
agg AS (
    SELECT
        k.model,
        k.env,
        count(DISTINCT k.run_id || '/' || k.episode_id) AS episodes,
        count(DISTINCT k.run_id || '/' || k.episode_id) FILTER (WHERE e.success) AS successful_episodes,
        count(*) AS calls,
        count(*) FILTER (WHERE k.batch_id IS NOT NULL) AS batched_calls,
        sum(k.input_tokens)::BIGINT AS input_tokens,
        sum(k.cache_read_tokens)::BIGINT AS cache_read_tokens,
        sum(k.cache_write_tokens)::BIGINT AS cache_write_tokens,
        sum(k.output_tokens)::BIGINT AS output_tokens,
        sum(k.cost_usd) AS cost_usd,
        sum(k.cost_no_batch_usd) AS cost_no_batch_usd,
        sum(k.cost_no_cache_usd) AS cost_no_cache_usd,
        sum(k.cost_list_usd) AS cost_list_usd
    FROM call_costs AS k
    LEFT JOIN ep AS e USING (run_id, episode_id)
    GROUP BY ALL
)
SELECT
    *,
    cache_read_tokens / nullif(input_tokens, 0) AS cache_hit_share,
    batched_calls / nullif(calls, 0) AS batched_share,
    cost_usd / nullif(episodes, 0) AS cost_per_episode_usd,
    cost_usd / nullif(successful_episodes, 0) AS cost_per_success_usd,
    1 - cost_usd / nullif(cost_list_usd, 0) AS saved_share
FROM agg;

-- episode_costs: per episode, the cost of all its calls (agent and judge) and the same without batch mode,
-- without caching and without either (NULL when a model of its calls has no price).
CREATE OR REPLACE VIEW episode_costs AS
SELECT
    e.run_id, e.episode_id, e.model, e.env, e.status, e.success,
    count(k.episode_id) AS calls,
    coalesce(sum(k.input_tokens), 0)::BIGINT AS input_tokens,
    coalesce(sum(k.cache_read_tokens), 0)::BIGINT AS cache_read_tokens,
    coalesce(sum(k.output_tokens), 0)::BIGINT AS output_tokens,
    sum(k.cost_usd) AS cost_usd,
    sum(k.cost_no_batch_usd) AS cost_no_batch_usd,
    sum(k.cost_no_cache_usd) AS cost_no_cache_usd,
    sum(k.cost_list_usd) AS cost_list_usd
FROM episodes AS e
LEFT JOIN call_costs AS k USING (run_id, episode_id)
GROUP BY ALL;
