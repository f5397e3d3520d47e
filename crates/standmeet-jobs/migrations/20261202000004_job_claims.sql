-- An attempt that started counts, even when its process dies (product.md §13).
--
-- A claim (src/jobs/claim.rs) locks its jobs in a transaction and runs them before it
-- writes anything, so a process that dies mid-attempt used to leave no trace: the
-- transaction ended with the connection, the jobs were `available` with their attempt
-- count unchanged, and the next claim anywhere picked the same job first. A job that
-- kills its process (an abort, a stack overflow, the OOM killer) crash-looped every
-- copy of StandMeet.
--
-- Now each claim, after locking its jobs and before any handler runs, leaves one row
-- here, committed on a connection of its own: its transaction's id, the jobs and the
-- attempt each starts. The claim's own write deletes the row in the transaction that
-- records the attempts, so a row that outlives its claim's transaction (the
-- transaction is no longer in progress: aborted, its connection closed, the process
-- gone) means those attempts started and were never recorded. While the row is here
-- no claim takes its jobs (job_claim skips them); once its lease ran out the rescuer
-- counts each attempt as failed ("its process died during the attempt": retryable
-- after the backoff, or discarded when out of attempts) and deletes the row. Until the
-- lease runs out the claim's own process, if alive, may still write the attempts
-- itself (its connection broke; see claim.rs).
--
-- One row per claim, not per job, and unlogged (no WAL): the trace costs one small
-- autocommit insert per batch of up to a thousand jobs. A crash of PostgreSQL itself
-- empties an unlogged table; what is lost then is the count of the attempts that were
-- running when the database crashed, not any job.
CREATE UNLOGGED TABLE job_claims (
    -- The claim's transaction (pg_current_xact_id()); pg_xact_status tells whether it
    -- is still in progress.
    xid        xid8        PRIMARY KEY,
    queue      text        NOT NULL,
    worker     text        NOT NULL,
    jobs       bigint[]    NOT NULL,
    attempts   smallint[]  NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now(),
    -- Until then only the claim's own process may settle its attempts.
    expires_at timestamptz NOT NULL,
    CHECK (cardinality(jobs) = cardinality(attempts))
) WITH (autovacuum_vacuum_threshold = 200, autovacuum_vacuum_scale_factor = 0);

CREATE INDEX job_claims_by_queue ON job_claims (queue);
