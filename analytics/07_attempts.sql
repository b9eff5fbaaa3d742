-- earlier_attempts: every attempt of an episode that was run again after an infrastructure failure (retried within the
-- run, or re-run by a resume), one row each. Nothing recorded is deleted: the transaction that stores a new attempt
-- moves the earlier one's rows to episode_attempts, attempt_turns and attempt_calls, so episodes/turns/model_calls
-- (and every score) hold the final attempt. episode_attempt: which attempt it was (1 = first); status and reason: how
-- it ended (reason: its error on one line, at most 200 characters); calls / failed_calls: its HTTP attempts (kept in
-- attempt_calls) and those without a 2xx answer; final_status / final_class: how the episode finally ended (its
-- episode_outcomes row; NULL if the file no longer holds it); still_failing: the final attempt is an infrastructure
-- failure too. config_id: as episode_outcomes.
CREATE OR REPLACE VIEW earlier_attempts AS
WITH calls AS (
    SELECT run_id, episode_id, episode_attempt,
        count(*) AS calls,
        count(*) FILTER (WHERE http_status IS NULL OR http_status NOT BETWEEN 200 AND 299) AS failed_calls
    FROM attempt_calls
    GROUP BY ALL
), attempts AS (
    SELECT a.*,
        CASE WHEN coalesce(getvariable('agentbench_pool'), false) THEN 'pooled' ELSE coalesce(a.fingerprint, a.run_id) END AS config_id
    FROM episode_attempts AS a
)
SELECT
    a.model,
    a.env,
    a.episode_id,
    a.task_id,
    a.episode_attempt,
    a.status,
    left(regexp_replace(coalesce(nullif(trim(a.error), ''), a.status), '\s+', ' ', 'g'), 200) AS reason,
    coalesce(c.calls, 0) AS calls,
    coalesce(c.failed_calls, 0) AS failed_calls,
    a.started_at,
    a.finished_at,
    a.run_id,
    a.superseded_by,
    o.status AS final_status,
    o.failure_class AS final_class,
    coalesce(o.infra, false) AS still_failing,
    a.config_id
FROM attempts AS a
LEFT JOIN calls AS c USING (run_id, episode_id, episode_attempt)
LEFT JOIN episode_outcomes AS o ON o.episode_id = a.episode_id AND o.config_id = a.config_id;

-- attempt_reasons: why episodes needed more than one attempt, per model x env x configuration x (status, reason) of
-- the earlier attempts: how many attempts and episodes, their failed calls, and an example episode.
CREATE OR REPLACE VIEW attempt_reasons AS
SELECT
    model,
    env,
    status,
    reason,
    count(*) AS attempts,
    count(DISTINCT episode_id) AS episodes,
    sum(failed_calls)::BIGINT AS failed_calls,
    min(episode_id) AS example_episode,
    config_id
FROM earlier_attempts
GROUP BY model, env, config_id, status, reason;

-- attempt_summary: per model x env x configuration, the episodes that needed more than one attempt (retried),
-- the earlier attempts kept and their failed calls, how many of those episodes ended with the model's own outcome
-- on a later attempt (recovered: scored) and how many still end in an infrastructure failure (still_failing: shown
-- apart, as env_scores' env_errors / model_errors / cancelled), and the most common reason.
CREATE OR REPLACE VIEW attempt_summary AS
WITH per_episode AS (
    SELECT model, env, config_id, episode_id, count(*) AS earlier, sum(failed_calls)::BIGINT AS failed_calls,
        bool_or(still_failing) AS still_failing, bool_or(final_status IS NOT NULL) AS final_known
    FROM earlier_attempts
    GROUP BY ALL
), top_reason AS (
    SELECT model, env, config_id, status || ': ' || reason AS top_reason
    FROM attempt_reasons
    QUALIFY row_number() OVER (PARTITION BY model, env, config_id ORDER BY attempts DESC, reason) = 1
)
SELECT
    p.model,
    p.env,
    count(*) AS retried,
    sum(p.earlier)::BIGINT AS earlier_attempts,
    sum(p.failed_calls)::BIGINT AS failed_calls,
    count(*) FILTER (WHERE p.final_known AND NOT p.still_failing) AS recovered,
    count(*) FILTER (WHERE p.still_failing) AS still_failing,
    any_value(t.top_reason) AS top_reason,
    p.config_id
FROM per_episode AS p
LEFT JOIN top_reason AS t USING (model, env, config_id)
GROUP BY p.model, p.env, p.config_id;
