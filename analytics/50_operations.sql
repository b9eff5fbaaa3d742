-- calls: every HTTP attempt with the model and environment it served (judge calls keep their own model), those of
-- earlier attempts of episodes run again included (attempt_calls: they were made and billed; earlier_attempt says which
-- attempt, NULL for the episode's final one), and the deciding configuration (config_id, as episode_outcomes) they ran in.
CREATE OR REPLACE VIEW calls AS
WITH every_call AS (
    SELECT m.*, NULL::INTEGER AS episode_attempt FROM model_calls AS m
    UNION ALL BY NAME
    SELECT a.* EXCLUDE (superseded_at, superseded_by) FROM attempt_calls AS a
), every_episode AS (
    SELECT DISTINCT run_id, episode_id, 0 AS attempt_key, model, env, fingerprint FROM episodes
    UNION ALL
    SELECT DISTINCT run_id, episode_id, episode_attempt AS attempt_key, model, env, fingerprint FROM episode_attempts
)
SELECT
    c.* EXCLUDE (episode_attempt),
    coalesce(c.model, e.model) AS call_model,
    e.env,
    c.episode_attempt AS earlier_attempt,
    CASE WHEN coalesce(getvariable('agentbench_pool'), false) THEN 'pooled' ELSE coalesce(e.fingerprint, c.run_id) END AS config_id
FROM every_call AS c
LEFT JOIN every_episode AS e
    ON e.run_id = c.run_id AND e.episode_id = c.episode_id AND e.attempt_key = coalesce(c.episode_attempt, 0);

-- call_usage: per model and caller (agent | judge): requests (first attempts), attempts, retries,
-- failed attempts, tokens and latency percentiles (milliseconds); then prompt caching (input tokens read
-- from and written to the provider's cache, and the hit share: read / input), batch mode (attempts that
-- went in a provider batch) and where the time went (answer_s, server_queue_s, limiter_wait_s). One row per model x
-- caller x deciding configuration (config_id): two configurations of a model are never pooled into one row.
CREATE OR REPLACE VIEW call_usage AS
SELECT
    call_model AS model,
    coalesce(caller, 'agent') AS caller,
    count(*) FILTER (WHERE attempt = 1) AS requests,
    count(*) AS attempts,
    count(*) FILTER (WHERE attempt > 1) AS retries,
    count(*) FILTER (WHERE error IS NOT NULL) AS failed_attempts,
    coalesce(sum(input_tokens), 0)::BIGINT AS input_tokens,
    coalesce(sum(output_tokens), 0)::BIGINT AS output_tokens,
    quantile_cont(latency_ms, 0.5) AS latency_p50_ms,
    quantile_cont(latency_ms, 0.9) AS latency_p90_ms,
    quantile_cont(latency_ms, 0.99) AS latency_p99_ms,
    max(latency_ms) AS latency_max_ms,
    min(started_at) AS first_call_at,
    max(started_at) AS last_call_at,
    coalesce(sum(cache_read_tokens), 0)::BIGINT AS cache_read_tokens,
    coalesce(sum(cache_write_tokens), 0)::BIGINT AS cache_write_tokens,
    coalesce(sum(cache_read_tokens), 0) / nullif(sum(input_tokens), 0) AS cache_hit_share,
    count(*) FILTER (WHERE batch_id IS NOT NULL) AS batched_attempts,
    -- where the time went: answering (latency, the server's queue included), of it in the server's queue where the
    -- server says so, and before sending, in the engine's limiter (NULL in files written before these columns)
    sum(latency_ms) / 1000 AS answer_s,
    sum(server_queue_ms) / 1000 AS server_queue_s,
    sum(queue_ms) / 1000 AS limiter_wait_s,
    config_id
FROM calls
GROUP BY ALL;

-- http_statuses: attempts per model and HTTP status (NULL = no HTTP answer), how many of them were
-- retries, how many failed, and the mean Retry-After the server asked for. no_answer tells the attempts
-- without an HTTP status apart: 'cancelled' (abandoned at Ctrl-C) or 'timeout or reset'.
CREATE OR REPLACE VIEW http_statuses AS
SELECT
    call_model AS model,
    http_status,
    CASE WHEN http_status IS NOT NULL THEN NULL
         WHEN starts_with(coalesce(error, ''), 'cancelled') THEN 'cancelled'
         ELSE 'timeout or reset' END AS no_answer,
    count(*) AS attempts,
    count(*) FILTER (WHERE attempt > 1) AS retries,
    count(*) FILTER (WHERE error IS NOT NULL) AS failed,
    avg(retry_after_s) AS mean_retry_after_s,
    any_value(left(error, 160)) FILTER (WHERE error IS NOT NULL) AS example_error
FROM calls
GROUP BY ALL;

-- calls_per_second: attempts started in each wall-clock second per model, with their latency.
CREATE OR REPLACE VIEW calls_per_second AS
SELECT
    call_model AS model,
    date_trunc('second', started_at) AS second,
    count(*) AS calls,
    count(*) FILTER (WHERE error IS NOT NULL) AS failed,
    avg(latency_ms) AS latency_mean_ms,
    quantile_cont(latency_ms, 0.5) AS latency_p50_ms,
    quantile_cont(latency_ms, 0.9) AS latency_p90_ms
FROM calls
WHERE started_at IS NOT NULL
GROUP BY ALL;

-- reasoning_usage: per model x environment x caller, the thinking: output tokens and the part of them
-- the server reported as reasoning (reasoning_share), calls whose reply was cut by the output budget or
-- the context window (model_calls.limit_kind), and assistant turns that carried thinking text.
CREATE OR REPLACE VIEW reasoning_usage AS
WITH c AS (
    SELECT
        call_model AS model,
        env,
        coalesce(caller, 'agent') AS caller,
        count(*) FILTER (WHERE http_status = 200) AS answered_calls,
        coalesce(sum(output_tokens), 0)::BIGINT AS output_tokens,
        sum(reasoning_tokens)::BIGINT AS reasoning_tokens,
        count(*) FILTER (WHERE limit_kind = 'output_budget') AS output_budget_exhausted,
        count(*) FILTER (WHERE limit_kind = 'context_window') AS context_window_hits
    FROM calls
    GROUP BY ALL
), t AS (
    SELECT e.model, e.env, count(*) AS turns_with_reasoning, sum(length(t.reasoning))::BIGINT AS reasoning_chars
    FROM turns AS t
    JOIN (SELECT DISTINCT run_id, episode_id, model, env FROM episodes) AS e USING (run_id, episode_id)
    WHERE t.role = 'assistant' AND coalesce(t.reasoning, '') <> ''
    GROUP BY ALL
)
SELECT
    c.*,
    c.reasoning_tokens / nullif(c.output_tokens, 0) AS reasoning_share,
    coalesce(t.turns_with_reasoning, 0) AS turns_with_reasoning,
    t.reasoning_chars
FROM c
LEFT JOIN t ON c.caller = 'agent' AND c.model = t.model AND c.env IS NOT DISTINCT FROM t.env;

-- thinking_removed: per run x model x environment where it happened, the model's replies whose <think> block was cut out
-- of the content before the environment read it (turns.think_removed; reasoning_handling: separate) and all its replies
-- there. AgentBench v0.2 parsed the whole content and kept it in the history: a named deviation (run_settings.py).
CREATE OR REPLACE VIEW thinking_removed AS
SELECT e.run_id, e.model, e.env,
       count(*) FILTER (WHERE t.think_removed) AS replies_touched,
       count(*) AS replies
FROM turns AS t
JOIN (SELECT DISTINCT run_id, episode_id, model, env FROM episodes) AS e USING (run_id, episode_id)
WHERE t.role = 'assistant' AND NOT coalesce(t.injected, false)
GROUP BY ALL
HAVING count(*) FILTER (WHERE t.think_removed) > 0;

-- call_rates: per model, HTTP attempts per second of wall-clock time: calls / the wall-clock seconds of the runs
-- that made them (run_states.wall_s: a run's start to its end, idle seconds included), beside the busiest
-- second (peak_calls_per_s), the seconds in which a call started (seconds_with_calls) and busy_s: the seconds
-- during which at least one call was in flight (the union of the calls' intervals, started_at to started_at +
-- latency_ms; one 900 s call is 900 busy seconds, not the one second it started in).
CREATE OR REPLACE VIEW call_rates AS
WITH per_run AS (
    SELECT call_model AS model, run_id, count(*) AS calls, min(started_at) AS first_call_at, max(started_at) AS last_call_at
    FROM calls
    GROUP BY ALL
), peaks AS (
    SELECT model, max(calls) AS peak_calls_per_s, count(*) AS seconds_with_calls FROM calls_per_second GROUP BY model
), spans AS (
    SELECT call_model AS model, started_at AS s, started_at + to_microseconds(round(coalesce(latency_ms, 0) * 1000)::BIGINT) AS e
    FROM calls
    WHERE started_at IS NOT NULL
), opened AS (  -- a call that starts after every earlier one ended opens a new busy stretch
    SELECT model, s, e, CASE WHEN s <= max(e) OVER (PARTITION BY model ORDER BY s, e ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
                             THEN 0 ELSE 1 END AS opens
    FROM spans
), stretches AS (
    SELECT model, s, e, sum(opens) OVER (PARTITION BY model ORDER BY s, e ROWS UNBOUNDED PRECEDING) AS stretch FROM opened
), busy AS (
    SELECT model, sum(epoch(e_max - s_min)) AS busy_s
    FROM (SELECT model, stretch, min(s) AS s_min, max(e) AS e_max FROM stretches GROUP BY ALL)
    GROUP BY model
)
SELECT
    p.model,
    sum(p.calls)::BIGINT AS calls,
    sum(s.wall_s) AS run_seconds,
    sum(p.calls) / nullif(sum(s.wall_s), 0) AS calls_per_s,
    any_value(k.peak_calls_per_s) AS peak_calls_per_s,
    any_value(k.seconds_with_calls) AS seconds_with_calls,
    min(p.first_call_at) AS first_call_at,
    max(p.last_call_at) AS last_call_at,
    any_value(b.busy_s) AS busy_s
FROM per_run AS p
LEFT JOIN run_states AS s USING (run_id)
LEFT JOIN peaks AS k ON k.model IS NOT DISTINCT FROM p.model
LEFT JOIN busy AS b ON b.model IS NOT DISTINCT FROM p.model
GROUP BY p.model;

-- tools_mode_replies: per model x environment, the model's own replies in tools mode (action_mode = 'tools'),
-- those without tool_calls, and how many of those carry text that looks like a call written out as JSON
-- ({"name": ..., "arguments": ...} or {"function": ...}, maybe in a ``` block): a server that does not fill
-- tool_calls (llama-cpp-python's default chat handler, llama.cpp without --jinja) answers like that, and every
-- episode then fails 'no tool call'. Reports and the end of a run print a hint when there are such replies.
CREATE OR REPLACE VIEW tools_mode_replies AS
SELECT
    e.model,
    e.env,
    count(*) AS replies,
    count(*) FILTER (WHERE t.tool_calls IS NULL) AS without_tool_calls,
    count(*) FILTER (WHERE t.tool_calls IS NULL AND regexp_matches(coalesce(t.content, ''),
        '^\s*(```[a-z]*\s*)?[\[{]\s*(\{\s*)?"(name|function|tool|tool_name)"\s*:', 's')) AS json_like_calls
FROM turns AS t
JOIN episodes AS e USING (run_id, episode_id)
WHERE e.action_mode = 'tools' AND t.role = 'assistant' AND t.turn > 0 AND NOT coalesce(t.injected, false)
GROUP BY ALL;
