-- Claim slots: the claims of a queue open at once are counted for the whole database,
-- however many StandMeet processes run the queue (src/jobs/claim.rs, begin_in_slot).
-- A claim's transaction begins by taking one of its queue's slots, a
-- transaction-scoped advisory lock (key, slot) with slot in 0 .. slots - 1: the
-- first free one, or, when all are taken, slot `mine` as soon as its holder commits,
-- waiting at most wait_ms. Answers whether it got a slot; a claim that did not (a
-- holder cut off from the database keeps its locks until PostgreSQL notices) goes
-- ahead without one rather than stall the queue.
--
-- A function rather than statements sent by the engine, because nothing here may
-- fail the claim's transaction: it is begun in the same round trip
-- (`BEGIN; SELECT standmeet_claim_slot(…)`), and a transaction that failed there would
-- go back to the connection pool still open and failed. So every error (the wait
-- timed out, a statement_timeout cancelled it, the lock table is full) is caught, and
-- the claim goes on without a slot; the lock wait's own timeout is put back as the
-- session had it. Going without a slot raises a WARNING, which StandMeet logs (sqlx
-- logs a notice at its level) and the server log keeps: it names the queue.
CREATE FUNCTION standmeet_claim_slot(queue text, key integer, slots integer, mine integer, wait_ms integer)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  session_lock_timeout text := current_setting('lock_timeout');
BEGIN
  FOR slot IN 0 .. slots - 1 LOOP
    IF pg_try_advisory_xact_lock(key, slot) THEN
      RETURN true;
    END IF;
  END LOOP;
  BEGIN
    PERFORM set_config('lock_timeout', wait_ms || 'ms', true);
    PERFORM pg_advisory_xact_lock(key, mine);
    PERFORM set_config('lock_timeout', session_lock_timeout, true);
    RETURN true;
  EXCEPTION WHEN lock_not_available OR query_canceled OR others THEN
    -- The block's rollback has put lock_timeout back.
    RAISE WARNING 'standmeet: the claim slots of queue % all stayed taken; this claim goes without one (%)',
      queue, SQLERRM;
    RETURN false;
  END;
EXCEPTION WHEN others THEN
  RETURN false;
END $$;
