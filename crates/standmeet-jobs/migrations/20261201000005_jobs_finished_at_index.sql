-- The Tasks panel's chart (jobs finished per minute over the last hour, by outcome)
-- reads finished jobs by when they finished: one entry per finished job (written once,
-- as the job finishes), like the other indexes on finished jobs, and the chart's count
-- is an index-only scan of the last hour's entries.
CREATE INDEX jobs_finalized_at_idx ON jobs (finalized_at, state) WHERE finalized_at IS NOT NULL;
