-- task_repeats: per model x env x configuration x task, how many counted repeats (infrastructure failures left
-- out) and how many succeeded: the input of pass@k and pass^k (computed by the report for k = 1..min n).
CREATE OR REPLACE VIEW task_repeats AS
SELECT
    model,
    env,
    split,
    task_id,
    count(*) AS n,
    count(*) FILTER (WHERE coalesce(success, false)) AS c,
    avg(counted_score) AS mean_score,
    config_id
FROM episode_outcomes
WHERE NOT infra
GROUP BY model, env, config_id, split, task_id;

-- repeat_spread: run-to-run spread (per model x env x configuration): the metric of each repeat index, then their mean/stddev/min/max.
CREATE OR REPLACE VIEW repeat_spread AS
WITH per_repeat AS (
    SELECT model, env, config_id, repeat, avg(counted_score) AS score, count(*) AS n
    FROM episode_outcomes
    WHERE NOT infra
    GROUP BY model, env, config_id, repeat
)
SELECT
    model,
    env,
    count(*) AS repeats,
    avg(score) AS mean_score,
    stddev_samp(score) AS stddev,
    min(score) AS min_score,
    max(score) AS max_score,
    config_id
FROM per_repeat
GROUP BY model, env, config_id;
