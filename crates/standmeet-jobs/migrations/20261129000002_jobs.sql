-- The job queue: every slow side effect (mail, fetching, indexing) is a row here.
-- See src/jobs/mod.rs for who moves a job between states, and why.

CREATE TYPE job_state AS ENUM (
    'available',  -- may run now; producers fetch these
    'scheduled',  -- waits for scheduled_at (inserted for later, or snoozed)
    'running',    -- held by a worker (attempted_by) under a lease
    'retryable',  -- an attempt failed; runs again at scheduled_at
    'completed',  -- terminal: done, output holds the result
    'discarded',  -- terminal: failed for good (out of attempts, or not retryable)
    'cancelled'   -- terminal: stopped by an admin or by its handler
);

CREATE TABLE jobs (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind             text        NOT NULL CHECK (char_length(kind) BETWEEN 1 AND 128),
    queue            text        NOT NULL DEFAULT 'default' CHECK (char_length(queue) BETWEEN 1 AND 64),
    args             jsonb       NOT NULL DEFAULT '{}',
    state            job_state   NOT NULL DEFAULT 'available',
    -- Attempts started so far; a fetch adds one.
    attempt          smallint    NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    max_attempts     smallint    NOT NULL DEFAULT 25 CHECK (max_attempts > 0),
    -- 1 runs first, 4 last.
    priority         smallint    NOT NULL DEFAULT 1 CHECK (priority BETWEEN 1 AND 4),
    scheduled_at     timestamptz NOT NULL DEFAULT now(),
    created_at       timestamptz NOT NULL DEFAULT now(),
    attempted_at     timestamptz,
    finalized_at     timestamptz,
    -- One entry per failed attempt: {"attempt": n, "at": timestamp, "error": text}.
    errors           jsonb       NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(errors) = 'array'),
    output           jsonb,
    -- The worker process holding a running job, and until when its lease runs; the
    -- holder renews the lease while alive, the rescuer takes back expired ones.
    attempted_by     text,
    lease_expires_at timestamptz,
    -- Set when an admin cancels a running job; the holder stops the attempt.
    cancel_requested_at timestamptz,

    CONSTRAINT jobs_finalized_at_iff_terminal
        CHECK ((state IN ('completed', 'discarded', 'cancelled')) = (finalized_at IS NOT NULL)),
    CONSTRAINT jobs_running_has_holder
        CHECK (state <> 'running' OR (attempted_by IS NOT NULL AND lease_expires_at IS NOT NULL))
);

-- An operator may move a job by hand (`UPDATE jobs SET state = 'cancelled' WHERE …`)
-- without thinking of finalized_at: fill it in (or clear it) so the row stays
-- consistent. StandMeet's own statements set it themselves, so this never fires for
-- them (see the WHEN clauses) and costs nothing on the hot path.
CREATE FUNCTION jobs_keep_finalized_at() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state IN ('completed', 'discarded', 'cancelled') THEN
        NEW.finalized_at := now();
    ELSE
        NEW.finalized_at := NULL;
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER jobs_keep_finalized_at_on_update
    BEFORE UPDATE OF state ON jobs
    FOR EACH ROW
    WHEN ((NEW.state IN ('completed', 'discarded', 'cancelled')) <> (NEW.finalized_at IS NOT NULL))
    EXECUTE FUNCTION jobs_keep_finalized_at();

CREATE TRIGGER jobs_keep_finalized_at_on_insert
    BEFORE INSERT ON jobs
    FOR EACH ROW
    WHEN ((NEW.state IN ('completed', 'discarded', 'cancelled')) <> (NEW.finalized_at IS NOT NULL))
    EXECUTE FUNCTION jobs_keep_finalized_at();

-- Fetching: the next available jobs of a queue, in priority order. Partial, so it
-- stays small however many finished jobs the table keeps.
CREATE INDEX jobs_fetch_idx ON jobs (queue, priority, scheduled_at, id) WHERE state = 'available';
-- The scheduler: scheduled and retryable jobs that have come due.
CREATE INDEX jobs_due_idx ON jobs (scheduled_at) WHERE state IN ('scheduled', 'retryable');
-- By state, oldest first or newest first: the Tasks panel's state filter and counts,
-- the rescuer and the lease renewal (running jobs are few), and the cleaner (finished
-- jobs are deleted oldest first). Every index costs an entry on each of a job's three
-- state changes, so there are as few as the reads allow. Filters by kind and
-- queue use indexes on finished jobs only: a job changes state (and so writes a new
-- index entry into every index) three times in its life, and these two indexes take
-- one entry per job instead of three. Unfinished jobs are few and found by state.
CREATE INDEX jobs_state_id_idx ON jobs (state, id);
CREATE INDEX jobs_finished_kind_id_idx ON jobs (kind, id) WHERE finalized_at IS NOT NULL;
CREATE INDEX jobs_finished_queue_id_idx ON jobs (queue, id) WHERE finalized_at IS NOT NULL;

-- Wake the workers of a queue when it gets available work: one notification per queue
-- per statement (and PostgreSQL folds duplicates within a transaction). Covers inserts
-- through the API and plain SQL alike.
CREATE FUNCTION jobs_notify_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('standmeet_job_insert', queue)
    FROM (SELECT DISTINCT queue FROM inserted_jobs WHERE state = 'available') AS queues;
    RETURN NULL;
END
$$;

CREATE TRIGGER jobs_notify_inserted
    AFTER INSERT ON jobs
    REFERENCING NEW TABLE AS inserted_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION jobs_notify_inserted();

-- Likewise when an existing job becomes available (the scheduler, an admin's retry).
CREATE FUNCTION jobs_notify_available() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('standmeet_job_insert', NEW.queue);
    RETURN NULL;
END
$$;

CREATE TRIGGER jobs_notify_available
    AFTER UPDATE OF state ON jobs
    FOR EACH ROW
    WHEN (NEW.state = 'available' AND OLD.state IS DISTINCT FROM 'available')
    EXECUTE FUNCTION jobs_notify_available();

-- Every move into a terminal state, by whatever path (a worker, a cancel, the rescuer,
-- an operator's UPDATE), tells the waiters in the same transaction: the notification is
-- sent if and only if the move commits.
CREATE FUNCTION jobs_notify_final() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('standmeet_job_final', NEW.id::text);
    RETURN NULL;
END
$$;

CREATE TRIGGER jobs_notify_final_on_update
    AFTER UPDATE OF state ON jobs
    FOR EACH ROW
    WHEN (NEW.state IN ('completed', 'discarded', 'cancelled')
          AND OLD.state NOT IN ('completed', 'discarded', 'cancelled'))
    EXECUTE FUNCTION jobs_notify_final();

CREATE TRIGGER jobs_notify_final_on_insert
    AFTER INSERT ON jobs
    FOR EACH ROW
    WHEN (NEW.state IN ('completed', 'discarded', 'cancelled'))
    EXECUTE FUNCTION jobs_notify_final();
