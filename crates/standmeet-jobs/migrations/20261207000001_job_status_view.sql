-- The engine's published view: how an application reads a job it keeps the id of
-- (its state, its last error in words, when it finished, its kind and arguments)
-- without knowing the shape of `jobs.errors`. The engine's documentation names it
-- public; its columns change only by being added at the end.
--
-- Until now the application defined the first five columns (its migration
-- 20261130000002, retired). REPLACE keeps them as they were, so a database that has the
-- application's view gets the engine's in its place, and a fresh one gets it here.
CREATE OR REPLACE VIEW job_status AS
SELECT id, kind, state, errors -> -1 ->> 'error' AS last_error, finalized_at, args
FROM jobs;
