-- task_repeats: per model x env x configuration x task, the tries n and how many succeeded c: the input of pass@k and
-- pass^k (computed by the report for k = 1..min n). Its denominator is the scores' (env_scores): every try, an
-- infrastructure failure (env_error, model_error, cancelled) counted as a failed try, as the paper counts every
-- sample; infra says how many of the n tries were such failures. task_repeats_outcomes leaves them out of n (the
-- model's own outcomes only: `agentbench report --denominator outcomes`); its infra column counts the ones left out.
CREATE OR REPLACE VIEW task_repeats_by_denominator AS
SELECT
    model,
    env,
    split,
    task_id,
    count(*) FILTER (WHERE d.denominator = 'paper' OR NOT infra) AS n,
    count(*) FILTER (WHERE NOT infra AND coalesce(success, false)) AS c,
    avg(CASE WHEN d.denominator = 'paper' THEN coalesce(counted_score, 0.0) ELSE counted_score END) AS mean_score,
    count(*) FILTER (WHERE infra) AS infra,
    config_id,
    d.denominator
FROM episode_outcomes
CROSS JOIN (VALUES ('paper'), ('outcomes')) AS d(denominator)
GROUP BY model, env, config_id, split, task_id, d.denominator;

CREATE OR REPLACE VIEW task_repeats AS
SELECT * EXCLUDE (denominator) FROM task_repeats_by_denominator WHERE denominator = 'paper';

CREATE OR REPLACE VIEW task_repeats_outcomes AS
SELECT * EXCLUDE (denominator) FROM task_repeats_by_denominator WHERE denominator = 'outcomes' AND n > 0;

-- repeat_spread: run-to-run spread (per model x env x configuration): the metric of each repeat index over the
-- scores' denominator (every episode, an infrastructure failure scoring 0), then their mean/stddev/min/max; infra:
-- the infrastructure failures among them. repeat_spread_outcomes: each repeat's score over the model's own outcomes.
CREATE OR REPLACE VIEW repeat_spread_by_denominator AS
WITH per_repeat AS (
    SELECT model, env, config_id, repeat, d.denominator,
        avg(CASE WHEN d.denominator = 'paper' THEN coalesce(counted_score, 0.0) ELSE counted_score END) AS score,
        count(*) FILTER (WHERE d.denominator = 'paper' OR NOT infra) AS n,
        count(*) FILTER (WHERE infra) AS infra
    FROM episode_outcomes
    CROSS JOIN (VALUES ('paper'), ('outcomes')) AS d(denominator)
    GROUP BY model, env, config_id, repeat, d.denominator
)
SELECT
    model,
    env,
    count(*) FILTER (WHERE n > 0) AS repeats,
    avg(score) AS mean_score,
    stddev_samp(score) AS stddev,
    min(score) AS min_score,
    max(score) AS max_score,
    sum(infra)::BIGINT AS infra,
    config_id,
    denominator
FROM per_repeat
GROUP BY model, env, config_id, denominator;

CREATE OR REPLACE VIEW repeat_spread AS
SELECT * EXCLUDE (denominator) FROM repeat_spread_by_denominator WHERE denominator = 'paper';

CREATE OR REPLACE VIEW repeat_spread_outcomes AS
SELECT * EXCLUDE (denominator) FROM repeat_spread_by_denominator WHERE denominator = 'outcomes';
