-- failure_classes: model x env x configuration (config_id) x failure class (see episode_outcomes): counts,
-- share of all the model x env's episodes, and share of the model's own outcomes (infrastructure failures
-- left out). completed_success holds every solved episode, also one whose status is not 'completed'
-- (solved_notes below counts those). turns_median: the median of the model turns its episodes used (for a failure
-- class, the turns to that failure; NULL where no episode of it counted turns).
CREATE OR REPLACE VIEW failure_classes AS
SELECT
    model,
    env,
    failure_class,
    bool_or(infra) AS infra,
    count(*) AS episodes,
    count(*) / sum(count(*)) OVER (PARTITION BY model, env, config_id) AS share,
    CASE WHEN bool_or(infra) THEN NULL
         ELSE count(*) / sum(CASE WHEN bool_or(infra) THEN 0 ELSE count(*) END) OVER (PARTITION BY model, env, config_id)
    END AS share_of_agent_outcomes,
    config_id,
    median(n_turns) AS turns_median
FROM episode_outcomes
GROUP BY model, env, config_id, failure_class;

-- paper_failure_table: AgentBench's five-column outcome table (paper convention, shares 0..1), built from
-- the status upstream would have recorded (episode_outcomes.paper_status, stored by each environment):
-- Completed, Context Limit Exceeded, Invalid Format (AGENT_VALIDATION_FAILED), Invalid Action, Task Limit
-- Exceeded, where the paper's TLE also holds UNKNOWN/TASK_ERROR (environment and API errors). Cancelled
-- episodes are left out. One row per model x env x configuration (config_id).
CREATE OR REPLACE VIEW paper_failure_table AS
SELECT
    model,
    env,
    count(*) AS episodes,
    avg((paper_class = 'completed')::DOUBLE) AS completed,
    avg((paper_class = 'context_limit_exceeded')::DOUBLE) AS context_limit_exceeded,
    avg((paper_class = 'invalid_format')::DOUBLE) AS invalid_format,
    avg((paper_class = 'invalid_action')::DOUBLE) AS invalid_action,
    avg((paper_class = 'task_limit_exceeded')::DOUBLE) AS task_limit_exceeded,
    config_id
FROM episode_outcomes
WHERE paper_class IS NOT NULL
GROUP BY model, env, config_id;

-- solved_notes: solved episodes whose status is not 'completed' (upstream's word for how they ended), per model x
-- env x configuration and note: reports print them beside the failure classes so a solved game is never read
-- as a failure.
CREATE OR REPLACE VIEW solved_notes AS
SELECT model, env, status, outcome_note, count(*) AS episodes, config_id
FROM episode_outcomes
WHERE outcome_note IS NOT NULL
GROUP BY model, env, config_id, status, outcome_note;
