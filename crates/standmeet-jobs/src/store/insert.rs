//! Inserting jobs: one, many of one kind in one statement, or one with a unique key.

use sqlx::{PgConnection, PgExecutor};
use time::OffsetDateTime;

use crate::{JobId, JobState};

/// Inserts one job. It is `scheduled` when `scheduled_at` lies ahead, else `available`.
#[allow(clippy::too_many_arguments)] // One job's columns, as the statement takes them.
pub(crate) async fn job_insert<'e>(
    executor: impl PgExecutor<'e>,
    kind: &str,
    queue: &str,
    args: &serde_json::Value,
    max_attempts: i16,
    priority: i16,
    scheduled_at: Option<OffsetDateTime>,
    trace_context: Option<&str>,
) -> Result<JobId, sqlx::Error> {
    sqlx::query_scalar!(
        r#"
        INSERT INTO jobs (kind, queue, args, max_attempts, priority, scheduled_at, state,
                          trace_context)
        VALUES ($1, $2, $3, $4, $5, coalesce($6, now()),
                CASE WHEN $6 > now() THEN 'scheduled'::job_state ELSE 'available'::job_state END,
                $7)
        RETURNING id AS "id: JobId"
        "#,
        kind,
        queue,
        args,
        max_attempts,
        priority,
        scheduled_at,
        trace_context,
    )
    .fetch_one(executor)
    .await
}

/// Inserts many jobs of one kind in one statement; answers their ids in order.
pub(crate) async fn job_insert_many(
    conn: &mut PgConnection,
    kind: &str,
    queue: &str,
    args: &[serde_json::Value],
    max_attempts: i16,
    priority: i16,
    trace_context: Option<&str>,
) -> Result<Vec<JobId>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"
        INSERT INTO jobs (kind, queue, args, max_attempts, priority, trace_context)
        SELECT $1, $2, a.args, $4, $5, $6
        FROM unnest($3::jsonb[]) WITH ORDINALITY AS a(args, n)
        ORDER BY a.n
        RETURNING id AS "id: JobId"
        "#,
        kind,
        queue,
        args,
        max_attempts,
        priority,
        trace_context,
    )
    .fetch_all(conn)
    .await
}

/// Inserts one job with `unique_key` unless an unfinished job holds that key; answers
/// the new job's id, or `None` when the key is taken (the insert waits for a
/// transaction that is inserting the same key, and counts its job once it commits).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn job_insert_unique(
    conn: &mut PgConnection,
    kind: &str,
    queue: &str,
    args: &serde_json::Value,
    max_attempts: i16,
    priority: i16,
    scheduled_at: Option<OffsetDateTime>,
    unique_key: &str,
    trace_context: Option<&str>,
) -> Result<Option<JobId>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"
        INSERT INTO jobs (kind, queue, args, max_attempts, priority, scheduled_at, state, unique_key,
                          trace_context)
        VALUES ($1, $2, $3, $4, $5, coalesce($6, now()),
                CASE WHEN $6 > now() THEN 'scheduled'::job_state ELSE 'available'::job_state END,
                $7, $8)
        ON CONFLICT (unique_key)
            WHERE unique_key IS NOT NULL AND state IN ('available', 'scheduled', 'running', 'retryable')
            DO NOTHING
        RETURNING id AS "id: JobId"
        "#,
        kind,
        queue,
        args,
        max_attempts,
        priority,
        scheduled_at,
        unique_key,
        trace_context,
    )
    .fetch_optional(conn)
    .await
}

/// The unfinished job that holds `unique_key`, with its state, if one does.
pub(crate) async fn job_unique_holder(
    conn: &mut PgConnection,
    unique_key: &str,
) -> Result<Option<(JobId, JobState)>, sqlx::Error> {
    let row = sqlx::query!(
        r#"
        SELECT id AS "id: JobId", state AS "state: JobState" FROM jobs
        WHERE unique_key = $1
          AND state IN ('available', 'scheduled', 'running', 'retryable')
        "#,
        unique_key,
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|row| (row.id, row.state)))
}

/// Has the running job `id` give up `unique_key` (it runs on, without a key), so that
/// the next job with that key can be inserted. Answers whether it did: `false` when the
/// job is no longer running or no longer holds that key.
pub(crate) async fn job_release_unique_key(
    conn: &mut PgConnection,
    id: JobId,
    unique_key: &str,
) -> Result<bool, sqlx::Error> {
    let released = sqlx::query!(
        "UPDATE jobs SET unique_key = NULL WHERE id = $1 AND unique_key = $2 AND state = 'running'",
        id.0,
        unique_key,
    )
    .execute(conn)
    .await?;
    Ok(released.rows_affected() == 1)
}
