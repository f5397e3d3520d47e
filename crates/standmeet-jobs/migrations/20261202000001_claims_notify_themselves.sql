-- Two changes that make a job's move into a terminal state cheaper to tell of, and
-- keep the promise as it was: the notification is sent if and only if the move
-- commits.
--
-- 1. A claim's write (src/jobs/store.rs, job_record_claimed) tells the waiters of the
--    jobs it finishes itself: a pg_notify per finished row in its RETURNING costs a
--    function call, where the trigger costs a PL/pgSQL call for each, about a tenth of
--    a quick job's database time. The statement says so with the transaction-local
--    setting standmeet.notifies_itself, and the trigger stands aside for it. Every
--    other move (the completer, a handler's own transaction, a cancel, the rescuer, an
--    operator's UPDATE) is told by the trigger, as before.
--
-- 2. The two notifying triggers on UPDATE fire BEFORE the row is written instead of
--    after: an AFTER trigger makes PostgreSQL read the old row once more for every
--    updated row just to test its WHEN, even when it does not fire. Sent before the
--    write is as good: a statement that then fails (a broken constraint) aborts its
--    transaction or savepoint, and PostgreSQL drops that one's notifications with it;
--    a row a concurrent update took away is skipped before its BEFORE triggers run.
--    A BEFORE trigger's function must answer the row to write, hence RETURN NEW (the
--    AFTER INSERT trigger that shares jobs_notify_final ignores it).

CREATE OR REPLACE FUNCTION jobs_notify_final() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('standmeet_job_final', NEW.id::text);
    RETURN NEW;
END
$$;

CREATE OR REPLACE FUNCTION jobs_notify_available() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('standmeet_job_insert', NEW.queue);
    RETURN NEW;
END
$$;

DROP TRIGGER jobs_notify_final_on_update ON jobs;
CREATE TRIGGER jobs_notify_final_on_update
    BEFORE UPDATE OF state ON jobs
    FOR EACH ROW
    WHEN (NEW.state IN ('completed', 'discarded', 'cancelled')
          AND OLD.state NOT IN ('completed', 'discarded', 'cancelled')
          AND current_setting('standmeet.notifies_itself', true) IS DISTINCT FROM 'on')
    EXECUTE FUNCTION jobs_notify_final();

DROP TRIGGER jobs_notify_available ON jobs;
CREATE TRIGGER jobs_notify_available
    BEFORE UPDATE OF state ON jobs
    FOR EACH ROW
    WHEN (NEW.state = 'available' AND OLD.state IS DISTINCT FROM 'available')
    EXECUTE FUNCTION jobs_notify_available();
