-- db_category_scores: db's score as AgentBench v0.2 computes it (DBBench.metrics' overall_cat_accuracy): the mean of
-- the SELECT, INSERT and UPDATE accuracies, every type other than INSERT and UPDATE (DELETE included) counted under
-- SELECT, per model x configuration x denominator (each category's accuracy as env_scores counts episodes: under the
-- paper's denominator an infrastructure failure is a 0 in its task's category, found from details.category of any
-- episode of the same task). On the official splits the categories hold the same number of tasks and the mean of the
-- three equals the mean over episodes; on a subset (--limit, --task-id) they differ, so env_scores takes this one.
-- Only where each of the three categories has episodes and every episode's category is known (v0.2 would count a
-- missing category as 0): score is NULL otherwise and env_scores keeps the mean over episodes. score_rule says which.
CREATE OR REPLACE VIEW db_category_scores AS
WITH typed AS (
    SELECT o.*,
        coalesce(json_extract_string(o.details, '$.category'),
                 any_value(json_extract_string(o.details, '$.category')) OVER (PARTITION BY o.env, o.split, o.task_id, o.source))
            AS category
    FROM episode_outcomes AS o
    WHERE o.env = 'db'
), counted AS (
    SELECT t.model, t.config_id, d.denominator, t.category,
        CASE WHEN d.denominator = 'paper' THEN coalesce(t.counted_score, 0.0) ELSE t.counted_score END AS s
    FROM typed AS t
    CROSS JOIN (VALUES ('paper'), ('outcomes')) AS d(denominator)
), per_category AS (
    SELECT model, config_id, denominator, category, avg(s) AS accuracy, count(s) AS n
    FROM counted
    GROUP BY ALL
), grouped AS (
    SELECT model, config_id, denominator,
        sum(accuracy) FILTER (WHERE category IN ('SELECT', 'INSERT', 'UPDATE') AND n > 0) / 3 AS categories_mean,
        list_filter(['SELECT', 'INSERT', 'UPDATE'], lambda c: NOT list_contains(list(category) FILTER (WHERE n > 0), c)) AS missing,
        count(*) FILTER (WHERE category IS NULL AND n > 0) > 0 AS unknown
    FROM per_category
    GROUP BY ALL
)
SELECT model, config_id, denominator,
    CASE WHEN len(missing) = 0 AND NOT unknown THEN categories_mean END AS score,
    CASE WHEN len(missing) = 0 AND NOT unknown THEN 'mean of the SELECT, INSERT and UPDATE accuracies (AgentBench v0.2)'
         WHEN unknown THEN 'mean over episodes (a task''s category is unknown: v0.2''s mean of the SELECT, INSERT and UPDATE accuracies cannot be computed)'
         ELSE 'mean over episodes (no ' || array_to_string(missing, ' or ') || ' task: v0.2''s mean of the three accuracies would count it as 0)'
    END AS score_rule
FROM grouped;
