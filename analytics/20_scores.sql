-- agentbench_weights: the paper's fixed weights (OA divides each environment's score, in percent,
-- by weight_inv), in the paper's column order.
CREATE OR REPLACE VIEW agentbench_weights AS
SELECT * FROM (VALUES
    (1, 'os', 'OS', 10.8, 'success rate'),
    (2, 'db', 'DB', 13.0, 'success rate'),
    (3, 'kg', 'KG', 13.9, 'F1'),
    (4, 'card_game', 'DCG', 12.0, 'reward (win rate + damage)'),
    (5, 'ltp', 'LTP', 3.5, 'game progress'),
    (6, 'alfworld', 'HH', 13.0, 'success rate'),
    (7, 'webshop', 'WS', 30.7, 'reward'),
    (8, 'mind2web', 'WB', 11.6, 'step success rate')
) AS w(position, env, abbrev, weight_inv, metric);

-- declared_metrics: what the score means for an environment that is not AgentBench's (a plugin, a --env FILE.py), as
-- it declared it (Environment.metric) and its runs stored it (runs.config.env_metrics); AgentBench's own are above.
CREATE OR REPLACE VIEW declared_metrics AS
SELECT m.key AS env, any_value(m.value ->> '$') AS metric
FROM runs AS r, json_each(r.config, '$.env_metrics') AS m
GROUP BY m.key;

-- env_scores: each model x env x configuration's metric = mean of episodes.score over every episode, as the paper
-- counts every sample: an infrastructure failure (env_error, model_error, cancelled) counts as a failure (score 0)
-- and is shown apart in the infra columns. env_scores_outcomes is the same table over the model's own outcomes only
-- (infrastructure failures out of the denominator: `agentbench report --denominator outcomes`). One row per
-- deciding configuration (config_id, see episode_outcomes): two configurations are never one score.
-- is_binary = every counted score is 0 or 1, and then wilson_low/wilson_high is the 95% Wilson interval;
-- for other metrics the report computes a bootstrap interval (Python, fixed seed).
-- db's score is AgentBench v0.2's mean of the SELECT, INSERT and UPDATE accuracies where the categories allow (equal to the
-- mean over episodes on the official splits; db_category_scores); score_rule says which rule gave a db score (NULL: others).
CREATE OR REPLACE VIEW env_scores_by_denominator AS
WITH counted AS (
    SELECT o.*, d.denominator,
        CASE WHEN d.denominator = 'paper' THEN coalesce(o.counted_score, 0.0) ELSE o.counted_score END AS denominator_score
    FROM episode_outcomes AS o
    CROSS JOIN (VALUES ('paper'), ('outcomes')) AS d(denominator)
), agg AS (
    SELECT
        model,
        env,
        denominator,
        -- an environment whose every episode was cancelled (the run stopped before any ended) has no score: n 0, score
        -- NULL, so it is not in OA (overall_score takes n > 0); its cancelled episodes are counted apart as ever
        CASE WHEN bool_and(status = 'cancelled') THEN 0 ELSE count(*) FILTER (WHERE denominator = 'paper' OR NOT infra) END AS n,
        CASE WHEN bool_and(status = 'cancelled') THEN NULL ELSE avg(denominator_score) END AS score,
        count(*) FILTER (WHERE NOT infra AND coalesce(success, false)) AS successes,
        coalesce(bool_and(denominator_score IN (0.0, 1.0)), true) AS is_binary,
        count(*) FILTER (WHERE status = 'env_error') AS env_errors,
        count(*) FILTER (WHERE status = 'model_error') AS model_errors,
        count(*) FILTER (WHERE status = 'cancelled') AS cancelled,
        count(*) AS episodes,
        config_id
    FROM counted
    GROUP BY model, env, denominator, config_id
), wil AS (
    -- db: AgentBench v0.2's mean of the SELECT/INSERT/UPDATE accuracies where the categories allow (15_db_categories.sql)
    SELECT agg.* REPLACE (coalesce(c.score, agg.score) AS score),
        CASE WHEN agg.env = 'db' THEN c.score_rule END AS score_rule,
        1.959963984540054 AS z
    FROM agg
    LEFT JOIN db_category_scores AS c ON agg.env = 'db' AND c.model = agg.model AND c.config_id IS NOT DISTINCT FROM agg.config_id
        AND c.denominator = agg.denominator
)
SELECT
    model,
    env,
    coalesce(w.metric, dm.metric, 'mean score') AS metric,
    n,
    score,
    successes,
    is_binary,
    CASE WHEN is_binary AND n > 0 THEN greatest(0.0,
        (score + z * z / (2 * n) - z * sqrt(score * (1 - score) / n + z * z / (4 * n * n))) / (1 + z * z / n))
    END AS wilson_low,
    CASE WHEN is_binary AND n > 0 THEN least(1.0,
        (score + z * z / (2 * n) + z * sqrt(score * (1 - score) / n + z * z / (4 * n * n))) / (1 + z * z / n))
    END AS wilson_high,
    env_errors,
    model_errors,
    cancelled,
    episodes,
    config_id,
    denominator,
    score_rule
FROM wil
LEFT JOIN agentbench_weights AS w USING (env)
LEFT JOIN declared_metrics AS dm USING (env);

CREATE OR REPLACE VIEW env_scores AS
SELECT * EXCLUDE (denominator) FROM env_scores_by_denominator WHERE denominator = 'paper';

CREATE OR REPLACE VIEW env_scores_outcomes AS
SELECT * EXCLUDE (denominator) FROM env_scores_by_denominator WHERE denominator = 'outcomes';

-- builtin_fallbacks: the environments of a model x configuration that played their built-in suites while others of it
-- played AgentBench's (or the user's) tasks: `--env all --data-dir` where kg, alfworld or webshop fell back. An OA they
-- contribute to is not the paper's, even with all eight run. (A run with no official task at all is named by the
-- data deviation above the scores instead.)
CREATE OR REPLACE VIEW builtin_fallbacks AS
WITH per_env AS (
    SELECT model, config_id, env,
        bool_or(source = 'builtin') AS builtin,
        bool_or(source IS DISTINCT FROM 'builtin') AS other
    FROM episode_outcomes
    GROUP BY model, config_id, env
)
SELECT model, env, config_id
FROM per_env
QUALIFY builtin AND bool_or(other) OVER (PARTITION BY model, config_id);

-- overall_score: the AgentBench overall score per model and configuration, OA = mean over environments of
-- (score in percent) / weight_inv. With all eight environments run it is the paper's OA; otherwise it
-- is the mean over the environments that were run, labelled partial. builtin_suites names the environments in it
-- that played built-in suites (builtin_fallbacks; NULL when none), and the label says so, as the report's does:
-- 'OA (not the paper's: built-in suites for KG, HH, WS)', or appended to a partial label. overall_score_outcomes: the
-- same from env_scores_outcomes (`report --denominator outcomes`). An environment that played a task file of the user's
-- own (--tasks, source 'custom') is not in it: those are not AgentBench's tasks.
CREATE OR REPLACE VIEW overall_score_by_denominator AS
WITH per_model AS (
    SELECT
        s.model,
        avg(100 * s.score / w.weight_inv) AS oa,
        count(*) AS envs_run,
        count(*) = 8 AS complete,
        string_agg(w.abbrev, ', ' ORDER BY w.position) AS envs,
        string_agg(w.abbrev, ', ' ORDER BY w.position) FILTER (WHERE b.env IS NOT NULL) AS builtin_suites,
        s.config_id,
        s.denominator
    FROM env_scores_by_denominator AS s
    JOIN agentbench_weights AS w USING (env)
    LEFT JOIN builtin_fallbacks AS b ON b.model = s.model AND b.config_id = s.config_id AND b.env = s.env
    WHERE s.n > 0
        AND NOT EXISTS (SELECT 1 FROM episode_outcomes AS c  -- tasks of the user's own (--tasks ENV=PATH): no OA of them
                        WHERE c.source = 'custom' AND c.model = s.model AND c.config_id = s.config_id AND c.env = s.env)
    GROUP BY s.model, s.config_id, s.denominator
)
SELECT
    model,
    oa,
    envs_run,
    complete,
    CASE WHEN complete AND builtin_suites IS NULL THEN 'OA'
         WHEN complete THEN 'OA (not the paper''s: built-in suites for ' || builtin_suites || ')'
         ELSE 'OA (partial: ' || envs_run || ' of 8 environments: ' || envs
              || coalesce('; built-in suites, not the paper''s tasks: ' || builtin_suites, '') || ')'
    END AS label,
    builtin_suites,
    config_id,
    denominator
FROM per_model;

CREATE OR REPLACE VIEW overall_score AS
SELECT * EXCLUDE (denominator) FROM overall_score_by_denominator WHERE denominator = 'paper';

CREATE OR REPLACE VIEW overall_score_outcomes AS
SELECT * EXCLUDE (denominator) FROM overall_score_by_denominator WHERE denominator = 'outcomes';
