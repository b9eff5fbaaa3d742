-- failure_summary: model x env x configuration x status counts and shares (share of the model x env's episodes
-- in that configuration). Built on episode_outcomes (one row per episode, resumed re-runs replace their
-- infrastructure failures; config_id: see there).
CREATE OR REPLACE VIEW failure_summary AS
SELECT
    model,
    env,
    status,
    count(*) AS episodes,
    count(*) / sum(count(*)) OVER (PARTITION BY model, env, config_id) AS share,
    config_id
FROM episode_outcomes
GROUP BY model, env, config_id, status;
