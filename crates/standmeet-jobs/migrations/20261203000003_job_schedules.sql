-- Periodic jobs (product.md §12), as River's periodic jobs, Oban's Cron and
-- graphile-worker's crontab, but kept in a table so that an admin can change them
-- while StandMeet runs.
--
-- A schedule inserts one job of `kind` with `args` on `queue` at every slot of `cron`
-- (five fields, or @hourly, @daily, @weekly, in STANDMEET_TIMEZONE), with the unique
-- key `schedule:<name>:<slot, RFC 3339>`. Every process with an engine looks at the
-- enabled schedules once a second; `fired_through` says up to which moment the slots
-- are accounted for, and only the process whose UPDATE moves it forward inserts the
-- slot's job, so N copies fire each slot once. A slot missed while no copy ran is made
-- up once (the newest missed slot), never once per missed slot; a schedule that is
-- created, enabled or given a new expression starts counting from that moment.
--
-- `last_job_id` names the newest job a firing or a "Run now" inserted. It is not a
-- foreign key: the cleaner deletes old jobs and should not pay for this table; a job
-- that was cleaned simply shows no last run.
CREATE TABLE job_schedules (
    name text PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9_-]{0,63}$'),
    cron text NOT NULL CHECK (char_length(cron) BETWEEN 1 AND 200),
    kind text NOT NULL CHECK (char_length(kind) BETWEEN 1 AND 128),
    args jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(args) = 'object'),
    queue text NOT NULL CHECK (char_length(queue) BETWEEN 1 AND 64),
    enabled boolean NOT NULL DEFAULT true,
    fired_through timestamptz NOT NULL DEFAULT now(),
    last_job_id bigint,
    last_run_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
