-- Every running process of the engine, the kinds it has handlers for, and when it last
-- said so (each renews its row with its leases). A job of a kind no live process knows
-- waits `available` for one that does (a rolling deploy), and the Tasks panel says so.
--
-- This table was first created by StandMeet's migration 20261130000001 (which also held
-- the application's tables): a database migrated before the engine had migrations of its
-- own already has it, exactly so, and this migration leaves it as it is.
CREATE TABLE IF NOT EXISTS job_workers (
    worker_id    text        PRIMARY KEY,
    kinds        text[]      NOT NULL,
    queues       text[]      NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now()
);
