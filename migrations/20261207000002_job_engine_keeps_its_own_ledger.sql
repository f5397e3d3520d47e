-- Changes nothing in the schema. From here on the job engine records its migrations in
-- a table of its own (`standmeet_job_migrations`, see `standmeet_jobs::migrate`), and
-- moves its rows there out of `_sqlx_migrations` the first time it runs. A build from
-- before that would find the engine's versions missing here and try to apply them
-- again; this version, which no such build knows, makes it refuse the database in
-- words before it touches anything (`db::migrate`'s check of unknown versions).
SELECT 1;
