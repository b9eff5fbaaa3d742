-- run_states: each run (invocation) with how it ended and how long it ran. state: finished | interrupted (Ctrl-C:
-- runs.interrupted) | not finished (no end recorded: the run is still writing the file, or its process was
-- killed; a reader that sees the run's live snapshot knows which). last_activity: the latest episode end or call
-- start of the run; wall_s: its wall-clock seconds, from its start to its end (or to its last activity).
CREATE OR REPLACE VIEW run_states AS
WITH activity AS (
    SELECT run_id, max(t) AS last_activity
    FROM (SELECT run_id, finished_at AS t FROM episodes UNION ALL SELECT run_id, started_at AS t FROM model_calls)
    GROUP BY run_id
)
SELECT
    r.run_id,
    r.fingerprint,
    r.command,
    r.created_at,
    r.finished_at,
    r.interrupted,
    CASE WHEN r.finished_at IS NULL THEN 'not finished' WHEN coalesce(r.interrupted, false) THEN 'interrupted' ELSE 'finished' END
        AS state,
    a.last_activity,
    greatest(0, epoch(coalesce(r.finished_at, a.last_activity, r.created_at)) - epoch(r.created_at)) AS wall_s,
    (SELECT count(*) FROM episodes AS e WHERE e.run_id = r.run_id) AS episodes
FROM runs AS r
LEFT JOIN activity AS a USING (run_id);

-- resume_work: per configuration (fingerprint), what running the same command again would re-run: episodes
-- stored with an infrastructure status (cancelled, env_error, model_error except a permanent refusal) and
-- episodes a stopped run left unfinished (their turns so far in live_turns: a finished episode has none there).
-- Tasks never started are not known here (a resume runs them too).
CREATE OR REPLACE VIEW resume_work AS
SELECT coalesce(fingerprint, run_id) AS config_id, status, count(*) AS episodes
FROM episode_outcomes
WHERE status IN ('cancelled', 'env_error')
   OR (status = 'model_error' AND NOT coalesce(TRY_CAST(json_extract(details, '$.permanent') AS BOOLEAN), false))
GROUP BY ALL
UNION ALL
SELECT coalesce(r.fingerprint, l.run_id) AS config_id, 'unfinished' AS status, count(DISTINCT l.episode_id) AS episodes
FROM live_turns AS l
LEFT JOIN runs AS r USING (run_id)
GROUP BY ALL;
