-- Finished jobs cost one index entry, and every view over them reads summaries.
--
-- On PostgreSQL 15 a job's move into a finished state cannot be a HOT update while
-- any index names `state` (its predicate counts), so each index that can find
-- finished jobs adds an entry per finished job: the chart's (finalized_at), the Tasks
-- panel's by kind and by queue, and the state index's entries for discarded and
-- cancelled jobs. They are dropped. A finished job now has its primary key entry and
-- nothing else; the indexes that remain hold unfinished jobs only (a few, however
-- many finished rows are kept):
--
--   jobs_pkey            (id)
--   jobs_fetch_idx       (queue, priority, scheduled_at, id) WHERE state = 'available'
--   jobs_due_idx         (scheduled_at) WHERE state IN ('scheduled', 'retryable')
--   jobs_unfinished_idx  (state, id) WHERE state IN ('available', 'scheduled', 'running', 'retryable')
--   jobs_unfinished_queue_kind_idx (queue, state, kind, id) WHERE state IN (the same four)
--
-- What those indexes answered is answered by two summaries instead, the way Sidekiq,
-- Oban Web and River UI show counts from metrics rather than by scanning jobs:
--
--   job_finished_minutes: how many finished jobs there are, by the minute they
--     finished, queue, kind and outcome (state): the chart, the queues' figures,
--     the panel's counts and /metrics;
--   job_finished_blocks: the same by block of 256 ids: which kinds, queues and
--     outcomes a block holds, so that the Tasks panel's filters over finished jobs
--     read only the blocks that hold a match, through the primary key, and the
--     cleaner finds the finished jobs.
--
-- Both count the rows as they are (not events): a job that finishes adds one, a
-- finished job retried, deleted or changed by hand takes its one back. They are
-- exact: every count they give equals count(*) over the jobs at the same moment,
-- because every change is counted in the transaction that makes it:
--   * StandMeet's writes of outcomes (a claim's write, the completer, a handler's own
--     transaction) and the cleaner count what they change in the same statement
--     (the upserts of job_summaries_add, over the rows they wrote), and say so for
--     their transaction
--     (standmeet.counts_itself), so that
--   * the triggers below, which count every other change row by row (a cancel, a
--     retry, a delete, the rescuer, an operator's UPDATE, DELETE, INSERT or
--     TRUNCATE), stand aside for them.
--
-- No contention between concurrent writers: each summary row belongs to one writer,
-- the backend (pg_backend_pid()) whose transaction wrote it, and a backend runs one
-- transaction at a time; the counts are sums over writers. The maintenance chore
-- (job_summaries_fold) folds the rows of past minutes and settled blocks into one row
-- per key (writer 0, which no backend is), coarsens minutes older than a few hours
-- into hours and days, and deletes rows that add up to nothing, so the tables stay
-- small and leave with the jobs they count.

DROP INDEX jobs_finalized_at_idx;
DROP INDEX jobs_finished_kind_id_idx;
DROP INDEX jobs_finished_queue_id_idx;
DROP INDEX jobs_state_id_idx;
-- The panel's unfinished states, the rescuer and the lease renewal (running), counts of
-- the unfinished: all few.
CREATE INDEX jobs_unfinished_idx ON jobs (state, id)
    WHERE state IN ('available', 'scheduled', 'running', 'retryable');
-- The queues' counts of unfinished jobs (an index-only scan), and the Tasks panel's
-- filters by queue or kind over the unfinished jobs (the finished ones are found
-- through job_finished_blocks below): without it, a kind that is in no unfinished job
-- reads every unfinished row to say so.
CREATE INDEX jobs_unfinished_queue_kind_idx ON jobs (queue, state, kind, id)
    WHERE state IN ('available', 'scheduled', 'running', 'retryable');

CREATE TABLE job_finished_minutes (
    -- The minute its jobs finished (date_trunc('minute', finalized_at)); an hour or a
    -- day once folded, for minutes older than the chart shows.
    minute timestamptz NOT NULL,
    queue  text        NOT NULL,
    kind   text        NOT NULL,
    state  job_state   NOT NULL CHECK (state IN ('completed', 'discarded', 'cancelled')),
    -- The backend that wrote this row; 0 once folded.
    writer integer     NOT NULL,
    -- How many jobs this writer added (negative: took back) under this key.
    jobs   bigint      NOT NULL,
    PRIMARY KEY (minute, queue, kind, state, writer)
);

-- Ids in blocks of 256: a rare kind's page reads at most 256 rows per block that
-- holds one of its jobs.
CREATE FUNCTION job_block(id bigint) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS 'SELECT id / 256';
CREATE FUNCTION job_block_first_id(block bigint) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS 'SELECT block * 256';

CREATE TABLE job_finished_blocks (
    block  bigint    NOT NULL,
    queue  text      NOT NULL,
    kind   text      NOT NULL,
    state  job_state NOT NULL CHECK (state IN ('completed', 'discarded', 'cancelled')),
    writer integer   NOT NULL,
    -- At most 256 (an integer: its sums are bigint, not numeric, and quick to add).
    jobs   integer   NOT NULL,
    PRIMARY KEY (block, queue, kind, state, writer)
);
-- The panel's filters by kind and by queue, newest block first (by state: the primary
-- key, newest first, is as good: nearly every block holds completed jobs).
CREATE INDEX job_finished_blocks_kind ON job_finished_blocks (kind, block);
CREATE INDEX job_finished_blocks_queue ON job_finished_blocks (queue, block);

-- The key a minute is kept under: itself for the last three hours (the chart shows
-- one), its hour for the two days before, its day before that. Which bucket a count
-- sits in changes nothing but how many rows the tables have.
CREATE FUNCTION job_minute_bucket(minute timestamptz) RETURNS timestamptz
    LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN minute >= date_trunc('hour', now()) - interval '2 hours' THEN minute
                WHEN minute >= date_trunc('day', now()) - interval '2 days'
                THEN date_trunc('hour', minute)
                ELSE date_trunc('day', minute) END
$$;

-- Adds `delta` (1: these jobs are now finished like this; -1: no longer) for each job
-- given by its parallel arrays, under the calling backend. PL/pgSQL so that its two
-- statements are planned once per connection.
CREATE FUNCTION job_summaries_add(
    ids bigint[], queues text[], kinds text[], states job_state[], finished timestamptz[],
    delta integer
) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF cardinality(ids) IS NULL OR cardinality(ids) = 0 THEN
        RETURN;
    END IF;
    INSERT INTO job_finished_minutes AS m (minute, queue, kind, state, writer, jobs)
    SELECT job_minute_bucket(date_trunc('minute', f.finished)), f.queue, f.kind, f.state,
           pg_backend_pid(), delta * count(*)
    FROM unnest(queues, kinds, states, finished) AS f(queue, kind, state, finished)
    GROUP BY 1, 2, 3, 4
    ON CONFLICT (minute, queue, kind, state, writer) DO UPDATE SET jobs = m.jobs + excluded.jobs;

    INSERT INTO job_finished_blocks AS b (block, queue, kind, state, writer, jobs)
    SELECT job_block(f.id), f.queue, f.kind, f.state, pg_backend_pid(), delta * count(*)::integer
    FROM unnest(ids, queues, kinds, states) AS f(id, queue, kind, state)
    GROUP BY 1, 2, 3, 4
    ON CONFLICT (block, queue, kind, state, writer) DO UPDATE SET jobs = b.jobs + excluded.jobs;
END
$$;

-- Every other change, counted row by row. BEFORE the row is written, after
-- jobs_keep_finalized_at (triggers of an event fire in name order) so that NEW is the
-- row as it will be; a statement that then fails takes its counts with it, and a row a
-- concurrent update took away is skipped before its BEFORE triggers run.
CREATE FUNCTION jobs_summarize() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.finalized_at IS NOT NULL THEN
        PERFORM job_summaries_add(ARRAY[OLD.id], ARRAY[OLD.queue], ARRAY[OLD.kind],
                                  ARRAY[OLD.state], ARRAY[OLD.finalized_at], -1);
    END IF;
    IF TG_OP = 'DELETE' THEN
        RETURN OLD;
    END IF;
    IF NEW.finalized_at IS NOT NULL THEN
        PERFORM job_summaries_add(ARRAY[NEW.id], ARRAY[NEW.queue], ARRAY[NEW.kind],
                                  ARRAY[NEW.state], ARRAY[NEW.finalized_at], 1);
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER jobs_summarize_on_update
    BEFORE UPDATE OF state, queue, kind, finalized_at ON jobs
    FOR EACH ROW
    WHEN ((OLD.finalized_at IS NOT NULL OR NEW.finalized_at IS NOT NULL)
          AND (OLD.state, OLD.queue, OLD.kind, OLD.finalized_at)
              IS DISTINCT FROM (NEW.state, NEW.queue, NEW.kind, NEW.finalized_at)
          AND current_setting('standmeet.counts_itself', true) IS DISTINCT FROM 'on')
    EXECUTE FUNCTION jobs_summarize();

CREATE TRIGGER jobs_summarize_on_delete
    BEFORE DELETE ON jobs
    FOR EACH ROW
    WHEN (OLD.finalized_at IS NOT NULL
          AND current_setting('standmeet.counts_itself', true) IS DISTINCT FROM 'on')
    EXECUTE FUNCTION jobs_summarize();

-- Inserts (of finished jobs: by an operator, or a benchmark's seed) once per statement,
-- from the transition table the insert notification already keeps.
CREATE FUNCTION jobs_summarize_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    f record;
BEGIN
    SELECT array_agg(id) AS ids, array_agg(queue) AS queues, array_agg(kind) AS kinds,
           array_agg(state) AS states, array_agg(finalized_at) AS finished
    INTO f
    FROM inserted_jobs WHERE finalized_at IS NOT NULL;
    PERFORM job_summaries_add(f.ids, f.queues, f.kinds, f.states, f.finished, 1);
    RETURN NULL;
END
$$;

CREATE TRIGGER jobs_summarize_inserted
    AFTER INSERT ON jobs
    REFERENCING NEW TABLE AS inserted_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION jobs_summarize_inserted();

CREATE FUNCTION jobs_summarize_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE job_finished_minutes, job_finished_blocks;
    RETURN NULL;
END
$$;

CREATE TRIGGER jobs_summarize_truncated
    AFTER TRUNCATE ON jobs
    FOR EACH STATEMENT EXECUTE FUNCTION jobs_summarize_truncated();

-- Folds the writers' rows of past minutes and of settled blocks (all but the newest
-- 16) into one row per key (writer 0), coarsens old minutes, and deletes keys whose
-- jobs add up to nothing. One process at a time (the others skip their turn). Each
-- fold is one statement that deletes rows and adds their sum back, so no count is
-- lost to a writer that comes in between (it waits for the row, then finds it gone and
-- inserts its own). Answers how many rows it deleted.
CREATE FUNCTION job_summaries_fold() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    folded_minutes bigint;
    folded_blocks bigint;
    newest_block bigint;
BEGIN
    IF NOT pg_try_advisory_xact_lock(hashtext('standmeet.job_summaries_fold')) THEN
        RETURN 0;
    END IF;

    WITH gone AS (
        DELETE FROM job_finished_minutes
        WHERE minute < date_trunc('minute', now()) - interval '1 minute'
          AND (writer <> 0 OR minute <> job_minute_bucket(minute))
        RETURNING minute, queue, kind, state, jobs
    ), added AS (
        INSERT INTO job_finished_minutes AS m (minute, queue, kind, state, writer, jobs)
        SELECT job_minute_bucket(minute), queue, kind, state, 0, sum(jobs)
        FROM gone GROUP BY 1, 2, 3, 4
        ON CONFLICT (minute, queue, kind, state, writer) DO UPDATE SET jobs = m.jobs + excluded.jobs
    )
    SELECT count(*) INTO folded_minutes FROM gone;
    DELETE FROM job_finished_minutes WHERE writer = 0 AND jobs = 0;

    SELECT max(block) INTO newest_block FROM job_finished_blocks;
    WITH gone AS (
        DELETE FROM job_finished_blocks
        WHERE writer <> 0 AND block < newest_block - 16
        RETURNING block, queue, kind, state, jobs
    ), added AS (
        INSERT INTO job_finished_blocks AS b (block, queue, kind, state, writer, jobs)
        SELECT block, queue, kind, state, 0, sum(jobs)::integer
        FROM gone GROUP BY 1, 2, 3, 4
        ON CONFLICT (block, queue, kind, state, writer) DO UPDATE SET jobs = b.jobs + excluded.jobs
    )
    SELECT count(*) INTO folded_blocks FROM gone;
    DELETE FROM job_finished_blocks WHERE writer = 0 AND jobs = 0;

    RETURN folded_minutes + folded_blocks;
END
$$;

-- The jobs kept before this migration, counted once (folded already: writer 0).
INSERT INTO job_finished_minutes (minute, queue, kind, state, writer, jobs)
SELECT job_minute_bucket(date_trunc('minute', finalized_at)), queue, kind, state, 0, count(*)
FROM jobs WHERE finalized_at IS NOT NULL
GROUP BY 1, 2, 3, 4;
INSERT INTO job_finished_blocks (block, queue, kind, state, writer, jobs)
SELECT job_block(id), queue, kind, state, 0, count(*)
FROM jobs WHERE finalized_at IS NOT NULL
GROUP BY 1, 2, 3, 4;
