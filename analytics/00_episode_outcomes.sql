-- episode_outcomes: one row per episode (the latest attempt of each episode_id within a config
-- fingerprint: an episode re-run on resume after env_error/model_error/cancelled replaces the old row;
-- an agent outcome always wins over an infrastructure one), with its failure class:
--   completed_success | completed_wrong | context_limit_exceeded | invalid_format | invalid_action
--   | task_limit_exceeded   (the model's outcomes: they count in scores)
--   | env_error | model_error | cancelled   (infrastructure: kept apart, never scored)
-- An episode the environment counts as solved (success) is completed_success whatever its status: status
-- keeps upstream's word (ltp plays every round, so a solved game ends 'task_limit_exceeded', AgentBench's
-- TASK_LIMIT_REACHED), and outcome_note says how it ended ('ended at the round limit, as AgentBench').
-- end_reason is the environment's own word for the ending (details.end_reason: ltp, card_game), if any.
-- config_id names the deciding configuration: the run's fingerprint (what decides results: models, split, data,
-- action mode, history, judge, environment options, seed), so scores, failure tables and comparisons never
-- pool two configurations of one model x environment; the run id for files without fingerprints. When the
-- reader asks to pool (SET VARIABLE agentbench_pool = true; `report --pool`) every row has config_id 'pooled'.
-- paper_status is what AgentBench v0.2 would have recorded for the episode, as the environment stored it
-- (episodes.paper_status); rows of files written before that column existed get the engine's default for
-- their status (statuses.DEFAULT_PAPER_STATUS). paper_class maps it onto the paper's five columns: its
-- Task Limit Exceeded also holds UNKNOWN and TASK_ERROR (environment and API errors); cancelled has none.
CREATE OR REPLACE VIEW episode_outcomes AS
WITH resolved AS (
    SELECT e.* REPLACE (
        CASE WHEN e.status = 'cancelled' THEN NULL
             ELSE coalesce(e.paper_status, CASE e.status
                 WHEN 'completed' THEN 'completed'
                 WHEN 'context_limit_exceeded' THEN 'agent context limit'
                 WHEN 'invalid_format' THEN 'agent validation failed'
                 WHEN 'invalid_action' THEN 'agent invalid action'
                 WHEN 'task_limit_exceeded' THEN 'task limit reached'
                 WHEN 'env_error' THEN 'unknown'
                 WHEN 'model_error' THEN 'task error'
                 WHEN 'episode_limit_exceeded' THEN 'task limit reached'
             END)
        END AS paper_status
    ),
    e.status IN ('env_error', 'model_error', 'cancelled') AS infra,
    nullif(TRY_CAST(json_extract_string(e.details, '$.end_reason') AS VARCHAR), '') AS end_reason
    FROM episodes AS e
)
SELECT
    r.*,
    CASE
        WHEN NOT r.infra AND coalesce(r.success, false) THEN 'completed_success'
        WHEN r.status = 'completed' THEN 'completed_wrong'
        ELSE r.status
    END AS failure_class,
    CASE r.paper_status
        WHEN 'completed' THEN 'completed'
        WHEN 'agent context limit' THEN 'context_limit_exceeded'
        WHEN 'agent validation failed' THEN 'invalid_format'
        WHEN 'agent invalid action' THEN 'invalid_action'
        WHEN 'task limit reached' THEN 'task_limit_exceeded'
        WHEN 'task error' THEN 'task_limit_exceeded'
        WHEN 'unknown' THEN 'task_limit_exceeded'
    END AS paper_class,
    CASE WHEN r.infra THEN NULL ELSE coalesce(r.score, 0.0) END AS counted_score,
    CASE WHEN coalesce(getvariable('agentbench_pool'), false) THEN 'pooled' ELSE coalesce(r.fingerprint, r.run_id) END AS config_id,
    CASE WHEN NOT r.infra AND coalesce(r.success, false) AND r.status <> 'completed' THEN
        CASE r.status
            WHEN 'task_limit_exceeded' THEN 'ended at the '
                || CASE WHEN coalesce(r.end_reason, r.error, '') ILIKE 'round limit%' THEN 'round' ELSE 'turn' END
                || ' limit, as AgentBench'
            WHEN 'context_limit_exceeded' THEN 'ended at the context limit with its result so far, as AgentBench'
            ELSE 'ended ' || replace(r.status, '_', ' ') || coalesce(' (' || coalesce(r.end_reason, r.error) || ')', '')
                 || ', as AgentBench'
        END
    END AS outcome_note
FROM resolved AS r
QUALIFY row_number() OVER (
    PARTITION BY coalesce(r.fingerprint, r.run_id), r.episode_id
    ORDER BY r.infra, r.finished_at DESC NULLS LAST, r.run_id DESC
) = 1;
