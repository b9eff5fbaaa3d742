-- transcript_turns, live_transcript_turns: the messages of finished (turns) and running (live_turns) episodes with
-- by_model: TRUE for the model's own replies only. Environment text is never the model's: turns.injected marks
-- what the environment put in the assistant role (few-shot examples, acknowledgements, rules re-inserted); in
-- files written before that column, the model's reply is the first message of each turn >= 1 (the engine
-- stores it before the environment's answer), so examples later in a turn (mind2web asks every round anew
-- after its examples) and everything at turn 0 (the prompt) are not the model's.
CREATE OR REPLACE MACRO written_by_model(role, turn, injected, first_of_turn) AS
    role = 'assistant' AND turn >= 1 AND coalesce(NOT injected, first_of_turn);

CREATE OR REPLACE VIEW transcript_turns AS
SELECT *, written_by_model(role, turn, injected, seq = min(seq) OVER (PARTITION BY run_id, episode_id, turn)) AS by_model
FROM turns;

CREATE OR REPLACE VIEW live_transcript_turns AS
SELECT *, written_by_model(role, turn, injected, seq = min(seq) OVER (PARTITION BY run_id, episode_id, turn)) AS by_model
FROM live_turns;

-- last_replies: each episode's last reply of the model (the output that ended it), truncated to 300 characters.
-- Only the model's own replies count (see transcript_turns): the reply is the first assistant message of its
-- turn that the environment did not inject, so the last one is the earliest such message of the latest turn.
-- An episode that ended before any reply has no row here.
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
WHERE role = 'assistant' AND turn > 0 AND NOT coalesce(injected, false)
QUALIFY row_number() OVER (PARTITION BY run_id, episode_id ORDER BY turn DESC, seq) = 1;

-- failure_reasons: for each model x env x configuration x failure class, the reasons episodes ended that way,
-- most frequent first. reason is the label of the environment's reason taxonomy where it names one
-- (details.failure_reason, e.g. db's 'SQL block without "Action: Operation"'), else the episode's error (else the environment's own end_reason, e.g. ltp's 'round
-- limit reached') with numbers replaced by N and long quoted text (25+ characters) by '…', so the same parser
-- complaint groups together while short actions stay visible; examples hold up to 3 (episode_id, error, last
-- output: the model's own last reply, see last_replies).
-- An episode whose last reply was empty because the output budget ran out (model_calls.limit_kind) gets the
-- reason 'output budget exhausted (reasoning)' (or without '(reasoning)' when no thinking was seen).
-- turns_min/median/max: how many model turns were used (for context_limit_exceeded: the turn the
-- context overflowed at; for task_limit_exceeded: the turns used before the cap).
CREATE OR REPLACE MACRO numbers_as_n(text) AS
    regexp_replace(text, '(^|[^A-Za-z0-9_.:/-])[0-9]+(\.[0-9]+)?($|[^A-Za-z0-9_/.:-]|[.:]$|[.:][^0-9])', '\1N\3', 'g');

CREATE OR REPLACE VIEW failure_reasons AS
WITH e AS (
    SELECT
        o.*,
        coalesce(
            CASE WHEN b.limit_kind = 'output_budget' AND coalesce(r.last_output, '') = ''
                 THEN 'output budget exhausted'
                      || CASE WHEN b.reasoned OR coalesce(r.last_has_reasoning, false) THEN ' (reasoning)' ELSE '' END END,
            -- the label of the environment's reason taxonomy (details.failure_reason: envs/reasons.py; the error adds the
            -- nearest match the parser found, kept in examples), stable across runs
            nullif(json_extract_string(o.details, '$.failure_reason'), ''),
            -- a number standing alone (counts, sizes, seconds) is N, so messages that differ only there group together;
            -- digits inside a name stay (gpt-4o-mini, claude-3-5, 127.0.0.1:8000, /v1). Twice: one match takes the
            -- separator the next one needs (1 2).
            numbers_as_n(numbers_as_n(
                regexp_replace(left(coalesce(o.error, o.end_reason), 200), '''[^'']{25,}''|"[^"]{25,}"', '''…''', 'g'))),
            CASE WHEN o.failure_class = 'completed_wrong' THEN 'finished with a wrong answer' ELSE '(no message)' END) AS reason,
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
    list({'episode_id': episode_id, 'error': left(coalesce(error, end_reason), 200), 'last_output': last_output}
         ORDER BY episode_id)[1:3] AS examples,
    config_id
FROM e
GROUP BY model, env, config_id, failure_class, reason;

-- turns_used: histogram input: how many episodes used how many model turns, per model x env x configuration x class.
CREATE OR REPLACE VIEW turns_used AS
SELECT model, env, failure_class, n_turns, count(*) AS episodes, config_id
FROM episode_outcomes
GROUP BY model, env, config_id, failure_class, n_turns;
