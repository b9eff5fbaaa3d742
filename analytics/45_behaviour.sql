-- How an episode failed, not only which class: what the model's own replies did, read from `turns`.
--
-- reply_actions: one row per reply of the model (transcript_turns.by_model: never environment text such as
-- few-shot examples; in files written before turns.injected, the first message of each turn >= 1), in order:
--   action_key   the action normalised: the parsed action, else the tool calls, else the reply text; lower case,
--                whitespace collapsed (so 'Click[Buy Now] ' and 'click[buy now]' are the same action)
--   loop_period  1 when this reply is the k-th (or later) same action in a row (k = 3, or SET VARIABLE
--                agentbench_loop_k), 2 or 3 when the last 2 x period actions are one sequence of 2 or 3 actions
--                done twice in a row (a b a b, a b c a b c); NULL when the reply repeats nothing
--   loop_from    the turn the detected repetition started at; loop_span numbers runs of consecutive repeats
--   reply        1, 2, ... : the reply's place among the episode's replies
--   invalid      the environment refused the action (turns.valid = false: it answered with an error)
--   obs_key      a hash of what the environment answered (turns.observation, else its messages of the same
--                turn) as it is (pages can be long: no normalising); NULL when it answered nothing
--   new_observation  this answer was not seen before in the episode
CREATE OR REPLACE VIEW reply_actions AS
WITH env_text AS (
    SELECT run_id, episode_id, turn, string_agg(content, ' ' ORDER BY seq) AS text
    FROM transcript_turns
    WHERE turn >= 1 AND role <> 'assistant'
    GROUP BY run_id, episode_id, turn
),
replies AS (
    SELECT
        t.run_id, t.episode_id, t.turn, t.seq, t.action, t.valid, t.error,
        lower(trim(regexp_replace(coalesce(t.action, CAST(t.tool_calls AS VARCHAR), t.content, ''), '\s+', ' ', 'g'))) AS action_key,
        CASE WHEN coalesce(t.observation, x.text, '') <> '' THEN hash(coalesce(t.observation, x.text)) END AS obs_key
    FROM transcript_turns AS t
    LEFT JOIN env_text AS x USING (run_id, episode_id, turn)
    WHERE t.by_model
    QUALIFY row_number() OVER (PARTITION BY t.run_id, t.episode_id, t.turn ORDER BY t.seq) = 1
),
ordered AS (
    SELECT
        *,
        row_number() OVER w AS r,
        row_number() OVER w - row_number() OVER (PARTITION BY run_id, episode_id, hash(action_key) ORDER BY turn) AS same_run,
        action_key = lag(action_key, 2) OVER w AS m2,
        action_key = lag(action_key, 3) OVER w AS m3,
        obs_key IS NOT NULL
            AND row_number() OVER (PARTITION BY run_id, episode_id, obs_key ORDER BY turn) = 1 AS new_observation
    FROM replies
    WINDOW w AS (PARTITION BY run_id, episode_id ORDER BY turn)
),
runs AS (
    SELECT
        *,
        row_number() OVER (PARTITION BY run_id, episode_id, hash(action_key), same_run ORDER BY turn) AS in_a_row,
        coalesce(m2 AND lag(m2) OVER w, false) AS cycle2,
        coalesce(m3 AND lag(m3) OVER w AND lag(m3, 2) OVER w, false) AS cycle3
    FROM ordered
    WINDOW w AS (PARTITION BY run_id, episode_id ORDER BY turn)
),
flagged AS (
    SELECT
        run_id, episode_id, turn, seq, r, action, action_key, valid, error,
        coalesce(NOT valid, false) AS invalid,
        obs_key,
        new_observation,
        CASE WHEN in_a_row >= coalesce(getvariable('agentbench_loop_k'), 3) THEN 1
             WHEN cycle2 THEN 2
             WHEN cycle3 THEN 3 END AS loop_period,
        CASE WHEN in_a_row >= coalesce(getvariable('agentbench_loop_k'), 3) THEN lag(turn, in_a_row - 1) OVER w
             WHEN cycle2 THEN lag(turn, 3) OVER w
             WHEN cycle3 THEN lag(turn, 5) OVER w END AS loop_from
    FROM runs
    WINDOW w AS (PARTITION BY run_id, episode_id ORDER BY turn)
)
SELECT
    * EXCLUDE (r),
    r AS reply,
    -- consecutive replies that repeat with the same period share a loop_span
    CASE WHEN loop_period IS NOT NULL
         THEN r - row_number() OVER (PARTITION BY run_id, episode_id, loop_period ORDER BY turn) END AS loop_span
FROM flagged;

-- env_behaviour_checks: an environment's own settings of the heuristics below (Environment.behaviour_checks, stored in
-- runs.config.env_behaviour_checks): looping false turns loops off; stalled N is its number of replies (0: off).
CREATE OR REPLACE VIEW env_behaviour_checks AS
SELECT c.key AS env,
    bool_and(coalesce(TRY_CAST(c.value ->> '$.looping' AS BOOLEAN), true)) AS looping,
    min(TRY_CAST(c.value ->> '$.stalled' AS INTEGER)) AS stalled
FROM runs AS r, json_each(r.config, '$.env_behaviour_checks') AS c
GROUP BY c.key;

-- episode_behaviour: one row per episode the model played (episode_outcomes without infrastructure failures):
--   replies, first_invalid_turn (the first action the environment refused), invalid_actions, recovered (after
--   the first refused action the model made a valid one: recovery_turn; NULL when nothing was refused),
--   last_new_observation_turn and turns_after_last_new (replies after the environment last said something new),
--   loop_from_turn/loop_to_turn/loop_period/loop_action (the first repetition, see reply_actions; to_turn is
--   the last reply that still repeated), and the episode's behaviour:
--   looping        a failed episode with a repetition (the same action k times in a row, or a cycle of 2 or 3)
--   stalled        a failed episode without one whose last 3 or more replies (agentbench_stall_turns) drew
--                  nothing new from the environment (longer cycles, rephrased repeats)
--                  (an environment may turn either off or set its own number of replies: env_behaviour_checks)
--   gave_up_early  the model itself ended the episode with a wrong answer (completed_wrong) in fewer replies than
--                  the median solved episode of the environment in the opened files (none solved: not judged)
--   recovered      the model made a valid action after the environment refused one (solved or not), and none
--                  of the above
--   none           none of these
-- evidence says which turns (e.g. 'turns 3-10: "click[add to cart]" 8 times in a row').
CREATE OR REPLACE VIEW episode_behaviour AS
WITH a AS MATERIALIZED (
    SELECT * FROM reply_actions
),
first_pass AS (
    SELECT
        run_id, episode_id,
        count(*) AS replies,
        max(turn) AS last_turn,
        min(turn) FILTER (WHERE invalid) AS first_invalid_turn,
        count(*) FILTER (WHERE invalid) AS invalid_actions,
        max(turn) FILTER (WHERE new_observation) AS last_new_observation_turn,
        arg_min(loop_from, turn) FILTER (WHERE loop_period IS NOT NULL) AS loop_from_turn,
        arg_min(loop_span, turn) FILTER (WHERE loop_period IS NOT NULL) AS first_loop_span,
        arg_min(loop_period, turn) FILTER (WHERE loop_period IS NOT NULL) AS loop_period
    FROM a
    GROUP BY run_id, episode_id
),
per_episode AS (
    -- the first repetition: how far it went (its run of consecutive repeating replies), the actions it repeats;
    -- the first valid action after the first refused one
    SELECT
        p.*,
        max(a.turn) FILTER (WHERE a.loop_period = p.loop_period AND a.loop_span = p.first_loop_span) AS loop_to_turn,
        list(a.action_key ORDER BY a.turn) FILTER (WHERE a.turn >= p.loop_from_turn) AS actions_from_loop,
        min(a.turn) FILTER (WHERE a.turn > p.first_invalid_turn AND coalesce(a.valid, false)) AS recovery_turn
    FROM first_pass AS p
    JOIN a USING (run_id, episode_id)
    GROUP BY ALL
),
solved_turns AS (
    SELECT env, median(n_turns) AS solved_median_turns
    FROM episode_outcomes
    WHERE failure_class = 'completed_success'
    GROUP BY env
),
e AS (
    SELECT
        o.run_id, o.episode_id, o.model, o.env, o.config_id, o.failure_class, o.n_turns,
        coalesce(p.replies, 0) AS replies,
        p.first_invalid_turn,
        coalesce(p.invalid_actions, 0) AS invalid_actions,
        CASE WHEN p.first_invalid_turn IS NULL THEN NULL ELSE p.recovery_turn IS NOT NULL END AS recovered,
        p.recovery_turn,
        p.last_new_observation_turn,
        p.last_turn - coalesce(p.last_new_observation_turn, 0) AS turns_after_last_new,
        p.loop_from_turn,
        p.loop_to_turn,
        p.loop_period,
        array_to_string(list_transform(p.actions_from_loop[1:p.loop_period], lambda x: '"' || left(x, 60) || '"'), ', ')
            AS loop_action,
        s.solved_median_turns,
        o.failure_class <> 'completed_success' AS failed,
        coalesce(h.looping, true) AS looping_on,
        CASE WHEN h.stalled = 0 THEN NULL ELSE coalesce(h.stalled, getvariable('agentbench_stall_turns'), 3) END AS stall_turns
    FROM episode_outcomes AS o
    LEFT JOIN per_episode AS p USING (run_id, episode_id)
    LEFT JOIN solved_turns AS s ON s.env = o.env
    LEFT JOIN env_behaviour_checks AS h ON h.env = o.env
    WHERE NOT o.infra
)
SELECT
    e.* EXCLUDE (failed, solved_median_turns, looping_on, stall_turns),
    CASE
        WHEN failed AND loop_period IS NOT NULL AND looping_on THEN 'looping'
        WHEN failed AND turns_after_last_new >= stall_turns THEN 'stalled'
        WHEN failure_class = 'completed_wrong' AND replies < solved_median_turns THEN 'gave_up_early'
        WHEN recovered THEN 'recovered'
        ELSE 'none'
    END AS behaviour,
    CASE
        WHEN failed AND loop_period IS NOT NULL AND looping_on THEN
            'turns ' || loop_from_turn || '-' || loop_to_turn || ': ' || loop_action
            || CASE loop_period WHEN 1 THEN ' ' || (loop_to_turn - loop_from_turn + 1) || ' times in a row'
                    ELSE ' over and over (a cycle of ' || loop_period || ')' END
        WHEN failed AND turns_after_last_new >= stall_turns THEN
            'nothing new from the environment after turn ' || coalesce(last_new_observation_turn, 0)
            || ' (' || turns_after_last_new || ' more repl' || CASE WHEN turns_after_last_new = 1 THEN 'y' ELSE 'ies' END || ')'
        WHEN failure_class = 'completed_wrong' AND replies < solved_median_turns THEN
            'answered after ' || replies || ' repl' || CASE WHEN replies = 1 THEN 'y' ELSE 'ies' END
            || '; solved ' || env || ' episodes took ' || regexp_replace(CAST(solved_median_turns AS VARCHAR), '\.0$', '') || ' (median)'
        WHEN recovered THEN 'first refused action at turn ' || first_invalid_turn || ', a valid one at turn ' || recovery_turn
        ELSE ''
    END AS evidence
FROM e;

-- behaviour_summary: per model x env x configuration: how the task-limit episodes failed (tle_looping of
-- tle_episodes: loop_share; tle_stalled) and whether the model recovered after the environment refused an action
-- (recovered of episodes_with_errors: recovery_rate), the count of each behaviour, and up to 3 example episodes
-- each of looping, stalled (task-limit episodes first), recovered and not recovered (episode_id, run_id, evidence);
-- recovery_possible: false where no refused action was followed by another reply (the refusal ended the episode).
CREATE OR REPLACE VIEW behaviour_summary AS
SELECT
    model,
    env,
    count(*) AS episodes,
    count(*) FILTER (WHERE failure_class = 'task_limit_exceeded') AS tle_episodes,
    count(*) FILTER (WHERE failure_class = 'task_limit_exceeded' AND behaviour = 'looping') AS tle_looping,
    count(*) FILTER (WHERE failure_class = 'task_limit_exceeded' AND behaviour = 'looping')
        / nullif(count(*) FILTER (WHERE failure_class = 'task_limit_exceeded'), 0) AS loop_share,
    count(*) FILTER (WHERE failure_class = 'task_limit_exceeded' AND behaviour = 'stalled') AS tle_stalled,
    count(*) FILTER (WHERE recovered IS NOT NULL) AS episodes_with_errors,
    count(*) FILTER (WHERE recovered) AS recovered,
    count(*) FILTER (WHERE recovered) / nullif(count(*) FILTER (WHERE recovered IS NOT NULL), 0) AS recovery_rate,
    count(*) FILTER (WHERE behaviour = 'looping') AS looping,
    count(*) FILTER (WHERE behaviour = 'stalled') AS stalled,
    count(*) FILTER (WHERE behaviour = 'gave_up_early') AS gave_up_early,
    count(*) FILTER (WHERE behaviour = 'recovered') AS recovered_label,
    list({'episode_id': episode_id, 'run_id': run_id, 'evidence': evidence} ORDER BY failure_class <> 'task_limit_exceeded', episode_id) FILTER (WHERE behaviour = 'looping')[1:3] AS looping_examples,
    list({'episode_id': episode_id, 'run_id': run_id, 'evidence': evidence} ORDER BY failure_class <> 'task_limit_exceeded', episode_id) FILTER (WHERE behaviour = 'stalled')[1:3] AS stalled_examples,
    list({'episode_id': episode_id, 'run_id': run_id, 'evidence': 'first refused action at turn ' || first_invalid_turn || ', a valid one at turn ' || recovery_turn}
         ORDER BY episode_id) FILTER (WHERE recovered)[1:3] AS recovered_examples,
    list({'episode_id': episode_id, 'run_id': run_id, 'evidence': 'first refused action at turn ' || first_invalid_turn || ', no valid one after it'}
         ORDER BY episode_id) FILTER (WHERE NOT recovered)[1:3] AS unrecovered_examples,
    config_id,
    -- whether a refused action let any episode go on (a reply after it): where the first refused reply ends the episode
    -- (db, os, as upstream) there is no recovery to measure, and the reports say so instead of "0 of N"
    coalesce(bool_or(first_invalid_turn < n_turns), false) AS recovery_possible
FROM episode_behaviour
GROUP BY model, env, config_id;
