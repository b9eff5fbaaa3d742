-- unsolvable_tasks: tasks that cannot be solved as AgentBench ships them, as the environment found when it set the
-- episode up (episodes.details.unsolvable_as_shipped holds why: official os dev 0-2 and 4, whose background program
-- never runs because the login shell eats its start command's tabs, as in AgentBench). One row per model x env x
-- configuration x task: its episodes, how many were solved anyway (a guess), their failure classes, the reason. They
-- are scored as AgentBench scores them; every report names them so their failures are not read as the model's.
CREATE OR REPLACE VIEW unsolvable_tasks AS
SELECT
    model,
    env,
    task_id,
    count(*) AS episodes,
    count(*) FILTER (WHERE failure_class = 'completed_success') AS solved,
    string_agg(DISTINCT failure_class, ', ' ORDER BY failure_class) AS classes,
    any_value(json_extract_string(details, '$.unsolvable_as_shipped')) AS reason,
    config_id
FROM episode_outcomes
WHERE json_extract_string(details, '$.unsolvable_as_shipped') IS NOT NULL
GROUP BY model, env, config_id, task_id;
