-- How the features that keep a job's id (an access request's mail, the owner's
-- confirmation, a source's last fetch, an entry's index) read that job: its state and
-- its last error in words. One definition, so no feature repeats the shape of
-- `jobs.errors`; a simple view, so PostgreSQL plans it as the join it replaces.
CREATE VIEW job_status AS
SELECT id, kind, state, errors -> -1 ->> 'error' AS last_error, finalized_at
FROM jobs;
