-- configurations: one row per deciding configuration (config_id, as every view keyed by configuration has it): its
-- runs in order, when the first and the last started, the model names it ran, and the latest run's stored config
-- (runs.config: every setting, API key variable names only). Join a view's config_id here to read what the
-- configuration was; reports label the same rows by the settings that tell a model's configurations apart.
CREATE OR REPLACE VIEW configurations AS
SELECT
    CASE WHEN coalesce(getvariable('agentbench_pool'), false) THEN 'pooled' ELSE coalesce(fingerprint, run_id) END AS config_id,
    list(run_id ORDER BY created_at) AS runs,
    min(created_at) AS first_run_at,
    max(created_at) AS last_run_at,
    list_sort(list_distinct(flatten(list(CAST(json_extract_string(config, '$.models[*].name') AS VARCHAR[]))))) AS models,
    arg_max(config, created_at) AS config
FROM runs
GROUP BY ALL;
