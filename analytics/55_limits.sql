-- call_limits: per model, what its request limits paced to, as noted on each call after its answer
-- (model_calls.rpm_limit, tpm_limit, in_flight_limit; NULL in files written before those columns): the
-- requests/min and tokens/min of the last answer (configured, or adopted from the server's rate-limit
-- headers), and how the in-flight cap moved (max_in_flight: auto): first, lowest, highest, last.
CREATE OR REPLACE VIEW call_limits AS
SELECT
    call_model AS model,
    arg_max(rpm_limit, started_at) FILTER (WHERE rpm_limit IS NOT NULL) AS rpm_limit,
    arg_max(tpm_limit, started_at) FILTER (WHERE tpm_limit IS NOT NULL) AS tpm_limit,
    arg_min(in_flight_limit, started_at) AS in_flight_first,
    min(in_flight_limit) AS in_flight_min,
    max(in_flight_limit) AS in_flight_max,
    arg_max(in_flight_limit, started_at) AS in_flight_last,
    count(*) FILTER (WHERE http_status = 429) AS refused_429,
    count(*) AS attempts
FROM calls
WHERE in_flight_limit IS NOT NULL
GROUP BY ALL;
