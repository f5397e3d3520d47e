-- Unique jobs (product.md §12), as River's unique jobs, graphile-worker's job keys and
-- Oban's unique options: a job may carry `unique_key`, and while a job with that key
-- is unfinished (`available`, `scheduled`, `running` or `retryable`) no other job with
-- the same key can exist. The database enforces it, so two processes inserting at once
-- make one job, and an operator's plain INSERT with a key that is taken gets
-- PostgreSQL's unique violation (naming this index) instead of a second job.
--
-- The engine's insert (`standmeet_jobs::insert_unique`) answers the existing job's id
-- when the key is taken. A kind whose running job is not to hold its key (a rebuild
-- that must be followed by another when something changed while it ran) has that job
-- give the key up when the next one is inserted: its `unique_key` becomes NULL, as
-- graphile-worker does with the key of a locked job.
--
-- Finished jobs have no entry here (the predicate names only unfinished states), so a
-- finished job still costs its primary key's entry and nothing else.
ALTER TABLE jobs ADD COLUMN unique_key text
    CONSTRAINT jobs_unique_key_check CHECK (char_length(unique_key) BETWEEN 1 AND 512);

CREATE UNIQUE INDEX jobs_unique_key_idx ON jobs (unique_key)
    WHERE unique_key IS NOT NULL AND state IN ('available', 'scheduled', 'running', 'retryable');
