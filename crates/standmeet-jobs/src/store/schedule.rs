//! `job_schedules`: the schedules of periodic jobs (see `periodic`, which checks what
//! goes in and does the cron arithmetic), and the claim of a slot that lets one process
//! of N fire it.

use sqlx::{PgConnection, PgExecutor, PgPool};
use time::OffsetDateTime;

use crate::{JobId, JobState};

/// A schedule as stored, with the state of the newest job it inserted (while kept).
pub(crate) struct ScheduleRow {
    pub name: String,
    pub cron: String,
    pub kind: String,
    pub args: serde_json::Value,
    pub queue: String,
    pub enabled: bool,
    pub last_run_at: Option<OffsetDateTime>,
    pub job_id: Option<JobId>,
    pub job_state: Option<JobState>,
}

/// Every schedule, by name.
pub(crate) async fn schedule_list(pool: &PgPool) -> Result<Vec<ScheduleRow>, sqlx::Error> {
    sqlx::query_as!(
        ScheduleRow,
        r#"
        SELECT s.name, s.cron, s.kind, s.args, s.queue, s.enabled, s.last_run_at,
               j.id AS "job_id?: JobId", j.state AS "job_state?: JobState"
        FROM job_schedules s LEFT JOIN jobs j ON j.id = s.last_job_id
        ORDER BY s.name
        "#
    )
    .fetch_all(pool)
    .await
}

/// Locks schedule `name` for a change, when it exists.
pub(crate) async fn schedule_lock(tx: &mut PgConnection, name: &str) -> Result<bool, sqlx::Error> {
    let found = sqlx::query_scalar!(
        "SELECT name FROM job_schedules WHERE name = $1 FOR UPDATE",
        name
    )
    .fetch_optional(tx)
    .await?;
    Ok(found.is_some())
}

/// A new schedule, as checked by `periodic::set`.
pub(crate) struct NewSchedule<'a> {
    pub name: &'a str,
    pub cron: &'a str,
    pub kind: &'a str,
    pub args: serde_json::Value,
    pub queue: &'a str,
    pub enabled: bool,
}

/// Creates a schedule unless one of its name exists, and says whether it did. A caller
/// that checked the name under the schedule's lock (an admin's new schedule) always
/// creates it; a built-in one is left as its admin may have changed it since.
pub(crate) async fn schedule_insert_missing(
    conn: impl PgExecutor<'_>,
    new: NewSchedule<'_>,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        r#"
        INSERT INTO job_schedules (name, cron, kind, args, queue, enabled)
        VALUES ($1, $2, $3, $4, $5, $6)
        ON CONFLICT (name) DO NOTHING
        "#,
        new.name,
        new.cron,
        new.kind,
        new.args,
        new.queue,
        new.enabled,
    )
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// What a change to an existing schedule sets; `None` keeps the value.
pub(crate) struct ScheduleUpdate<'a> {
    pub name: &'a str,
    pub cron: Option<&'a str>,
    pub kind: Option<&'a str>,
    pub args: Option<serde_json::Value>,
    pub queue: Option<&'a str>,
    pub enabled: Option<bool>,
}

/// Changes a schedule. A new expression, or enabling a disabled one, counts its slots
/// from now on (`fired_through`), so that no slot of the past fires.
pub(crate) async fn schedule_update(
    tx: &mut PgConnection,
    change: ScheduleUpdate<'_>,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        r#"
            UPDATE job_schedules
            SET fired_through = CASE
                    WHEN ($2::text IS NOT NULL AND $2 <> cron) OR ($6 AND NOT enabled) THEN now()
                    ELSE fired_through END,
                cron = coalesce($2, cron), kind = coalesce($3, kind), args = coalesce($4, args),
                queue = coalesce($5, queue), enabled = coalesce($6, enabled), updated_at = now()
            WHERE name = $1
            "#,
        change.name,
        change.cron,
        change.kind,
        change.args,
        change.queue,
        change.enabled,
    )
    .execute(tx)
    .await?;
    Ok(())
}

/// A schedule locked for "Run now": its job's kind, args and queue, and its newest job
/// when that has not finished.
pub(crate) struct ScheduleToRun {
    pub kind: String,
    pub args: serde_json::Value,
    pub queue: String,
    pub pending: Option<JobId>,
}

/// Locks schedule `name` for "Run now", when it exists.
pub(crate) async fn schedule_lock_to_run(
    tx: &mut PgConnection,
    name: &str,
) -> Result<Option<ScheduleToRun>, sqlx::Error> {
    sqlx::query_as!(
        ScheduleToRun,
        r#"
        SELECT s.kind, s.args, s.queue, j.id AS "pending?: JobId"
        FROM job_schedules s
        LEFT JOIN jobs j ON j.id = s.last_job_id
             AND j.state IN ('available', 'scheduled', 'running', 'retryable')
        WHERE s.name = $1
        FOR UPDATE OF s
        "#,
        name
    )
    .fetch_optional(tx)
    .await
}

/// An enabled schedule, for the firing loop.
pub(crate) struct EnabledSchedule {
    pub name: String,
    pub cron: String,
    pub kind: String,
    pub fired_through: OffsetDateTime,
}

/// The enabled schedules, by name.
pub(crate) async fn schedule_enabled(pool: &PgPool) -> Result<Vec<EnabledSchedule>, sqlx::Error> {
    sqlx::query_as!(
        EnabledSchedule,
        "SELECT name, cron, kind, fired_through FROM job_schedules WHERE enabled ORDER BY name"
    )
    .fetch_all(pool)
    .await
}

/// The job a claimed slot inserts.
pub(crate) struct SlotToFire {
    pub kind: String,
    pub args: serde_json::Value,
    pub queue: String,
}

/// Claims `slot` of schedule `name`: moves its `fired_through` forward, unless another
/// process did (or the schedule was disabled) meanwhile. Only the process whose update
/// moved it inserts the slot's job, in the same transaction.
pub(crate) async fn schedule_claim_slot(
    tx: &mut PgConnection,
    name: &str,
    slot: OffsetDateTime,
) -> Result<Option<SlotToFire>, sqlx::Error> {
    sqlx::query_as!(
        SlotToFire,
        r#"
        UPDATE job_schedules SET fired_through = $2
        WHERE name = $1 AND enabled AND fired_through < $2
        RETURNING kind, args, queue
        "#,
        name,
        slot,
    )
    .fetch_optional(tx)
    .await
}

/// Records `job` as the newest one schedule `name` inserted.
pub(crate) async fn schedule_record_run(
    tx: &mut PgConnection,
    name: &str,
    job: JobId,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE job_schedules SET last_job_id = $2, last_run_at = now() WHERE name = $1",
        name,
        job.0
    )
    .execute(tx)
    .await?;
    Ok(())
}
