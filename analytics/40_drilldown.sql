-- last_replies: each episode's last assistant message (the output that ended it), truncated to 300 characters.
-- Only the model's own replies count (turn >= 1): turn 0 is the prompt, whose one-shot examples hold
-- assistant messages the model never wrote; an episode that ended before any reply has no row here.
CREATE OR REPLACE VIEW last_replies AS
SELECT
    run_id,
    episode_id,
    turn,
    left(coalesce(content, CAST(tool_calls AS VARCHAR), ''), 300) AS last_output,
    action AS last_action,
    error AS last_error,
    coalesce(reasoning, '') <> '' AS last_has_reasoning
FROM turns
WHERE role = 'assistant' AND turn > 0
QUALIFY row_number() OVER (PARTITION BY run_id, episode_id ORDER BY seq DESC) = 1;

-- failure_reasons: for each model x env x failure class, the reasons episodes ended that way, most
-- frequent first. reason is the episode's error with numbers replaced by N and long quoted text (25+
-- characters) by '…', so the same parser complaint groups together while short actions stay visible; examples hold up to 3 (episode_id, error, last output).
-- An episode whose last reply was empty because the output budget ran out (model_calls.limit_kind) gets the
-- reason 'output budget exhausted (reasoning)' (or without '(reasoning)' when no thinking was seen).
-- turns_min/median/max: how many model turns were used (for context_limit_exceeded: the turn the
-- context overflowed at; for task_limit_exceeded: the turns used before the cap).
CREATE OR REPLACE VIEW failure_reasons AS
WITH e AS (
    SELECT
        o.*,
        coalesce(
            CASE WHEN b.limit_kind = 'output_budget' AND coalesce(r.last_output, '') = ''
                 THEN 'output budget exhausted'
                      || CASE WHEN b.reasoned OR coalesce(r.last_has_reasoning, false) THEN ' (reasoning)' ELSE '' END END,
            regexp_replace(
                regexp_replace(left(o.error, 200), '''[^'']{25,}''|"[^"]{25,}"', '''…''', 'g'),
                '[0-9]+(\.[0-9]+)?', 'N', 'g'),
            '(no message)') AS reason,
        r.last_output
    FROM episode_outcomes AS o
    LEFT JOIN last_replies AS r USING (run_id, episode_id)
    LEFT JOIN (
        SELECT run_id, episode_id, limit_kind, coalesce(reasoning_tokens, 0) > 0 AS reasoned
        FROM model_calls
        WHERE coalesce(caller, 'agent') = 'agent'
        QUALIFY row_number() OVER (PARTITION BY run_id, episode_id ORDER BY turn DESC, attempt DESC) = 1
    ) AS b USING (run_id, episode_id)
    WHERE o.failure_class <> 'completed_success'
)
SELECT
    model,
    env,
    failure_class,
    reason,
    count(*) AS episodes,
    min(n_turns) AS turns_min,
    median(n_turns) AS turns_median,
    max(n_turns) AS turns_max,
    list({'episode_id': episode_id, 'error': left(error, 200), 'last_output': last_output}
         ORDER BY episode_id)[1:3] AS examples
FROM e
GROUP BY model, env, failure_class, reason;

-- turns_used: histogram input: how many episodes used how many model turns, per model x env x class.
CREATE OR REPLACE VIEW turns_used AS
SELECT model, env, failure_class, n_turns, count(*) AS episodes
FROM episode_outcomes
GROUP BY model, env, failure_class, n_turns;
