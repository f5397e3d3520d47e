-- One definition of how finished jobs are counted in their summaries
-- (`job_finished_minutes`, `job_finished_blocks`), for every writer: the engine's
-- statements that count what they finish or delete themselves (a claim's write, the
-- completer's, the cleaner's) call it over their own RETURNING, and the triggers that
-- count every other change call it through `job_summaries_add`.
--
-- A SQL function, not PL/pgSQL: nothing to compile on each new connection, which is
-- why those statements used to write the two upserts out. It answers how many summary
-- rows it touched (a statement calls it from a CTE that it reads, so that it runs).
CREATE FUNCTION job_summaries_count(
    ids bigint[], queues text[], kinds text[], states job_state[], finished timestamptz[],
    delta integer
) RETURNS bigint LANGUAGE sql VOLATILE AS $$
    WITH minutes AS (
        INSERT INTO job_finished_minutes AS m (minute, queue, kind, state, writer, jobs)
        SELECT job_minute_bucket(date_trunc('minute', f.finished)), f.queue, f.kind, f.state,
               pg_backend_pid(), delta * count(*)
        FROM unnest(queues, kinds, states, finished) AS f(queue, kind, state, finished)
        GROUP BY 1, 2, 3, 4
        ON CONFLICT (minute, queue, kind, state, writer) DO UPDATE SET jobs = m.jobs + excluded.jobs
        RETURNING 1
    ), blocks AS (
        INSERT INTO job_finished_blocks AS b (block, queue, kind, state, writer, jobs)
        SELECT job_block(f.id), f.queue, f.kind, f.state, pg_backend_pid(), delta * count(*)::integer
        FROM unnest(ids, queues, kinds, states) AS f(id, queue, kind, state)
        GROUP BY 1, 2, 3, 4
        ON CONFLICT (block, queue, kind, state, writer) DO UPDATE SET jobs = b.jobs + excluded.jobs
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM minutes) + (SELECT count(*) FROM blocks)
$$;

-- The triggers' entry point keeps its name and arguments, and counts the same way.
CREATE OR REPLACE FUNCTION job_summaries_add(
    ids bigint[], queues text[], kinds text[], states job_state[], finished timestamptz[],
    delta integer
) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF cardinality(ids) IS NULL OR cardinality(ids) = 0 THEN
        RETURN;
    END IF;
    PERFORM job_summaries_count(ids, queues, kinds, states, finished, delta);
END
$$;
