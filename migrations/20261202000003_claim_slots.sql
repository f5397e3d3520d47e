-- Claim slots: the claims of a queue open at once are counted for the whole database,
-- however many StandMeet processes run the queue (src/jobs/claim.rs, begin_in_slot).
-- A claim's transaction begins by taking one of its queue's slots, a
-- transaction-scoped advisory lock (key, slot) with slot in 0 .. slots - 1: the
-- first free one, or, when all are taken, slot `mine` as soon as its holder commits,
-- waiting at most wait_ms. Answers whether it got a slot; a claim that did not (a
-- holder cut off from the database keeps its locks until PostgreSQL notices) goes
-- ahead without one rather than stall the queue.
--
-- A function rather than statements sent by the engine, because the timed-out wait
-- must not abort the claim's transaction: the exception block catches it (in a
-- subtransaction, entered only when every slot was taken), and the claim's
-- transaction goes on.
CREATE FUNCTION standmeet_claim_slot(key integer, slots integer, mine integer, wait_ms integer)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  FOR slot IN 0 .. slots - 1 LOOP
    IF pg_try_advisory_xact_lock(key, slot) THEN
      RETURN true;
    END IF;
  END LOOP;
  BEGIN
    PERFORM set_config('lock_timeout', wait_ms || 'ms', true);
    PERFORM pg_advisory_xact_lock(key, mine);
    -- Back to what the session had (a rolled-back subtransaction undoes it anyway).
    SET LOCAL lock_timeout TO DEFAULT;
    RETURN true;
  EXCEPTION WHEN lock_not_available THEN
    RETURN false;
  END;
END $$;
