-- The backoff of a failed attempt, in one place: `base_ms × attempt⁴`, give or take
-- 10 % (so that jobs that failed together do not all come back in the same instant),
-- at most `cap_ms`. Every writer of a failed attempt goes through it: a claim's write,
-- the completer, and the rescuer (lost leases, and claims whose process died).
CREATE FUNCTION job_backoff(attempt integer, base_ms double precision, cap_ms double precision)
RETURNS interval
LANGUAGE sql VOLATILE
AS $$
    SELECT least(base_ms * power(greatest(attempt, 1), 4) * (0.9 + random() * 0.2), cap_ms)
           * interval '1 millisecond'
$$;
