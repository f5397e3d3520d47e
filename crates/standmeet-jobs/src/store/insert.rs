//! Inserting jobs: one, or many of one kind in one statement.

use sqlx::{PgConnection, PgExecutor};
use time::OffsetDateTime;

use crate::JobId;

/// Inserts one job. It is `scheduled` when `scheduled_at` lies ahead, else `available`.
pub async fn job_insert<'e>(
    executor: impl PgExecutor<'e>,
    kind: &str,
    queue: &str,
    args: &serde_json::Value,
    max_attempts: i16,
    priority: i16,
    scheduled_at: Option<OffsetDateTime>,
) -> Result<JobId, sqlx::Error> {
    sqlx::query_scalar!(
        r#"
        INSERT INTO jobs (kind, queue, args, max_attempts, priority, scheduled_at, state)
        VALUES ($1, $2, $3, $4, $5, coalesce($6, now()),
                CASE WHEN $6 > now() THEN 'scheduled'::job_state ELSE 'available'::job_state END)
        RETURNING id AS "id: JobId"
        "#,
        kind,
        queue,
        args,
        max_attempts,
        priority,
        scheduled_at,
    )
    .fetch_one(executor)
    .await
}

/// Inserts many jobs of one kind in one statement; answers their ids in order.
pub async fn job_insert_many(
    conn: &mut PgConnection,
    kind: &str,
    queue: &str,
    args: &[serde_json::Value],
    max_attempts: i16,
    priority: i16,
) -> Result<Vec<JobId>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"
        INSERT INTO jobs (kind, queue, args, max_attempts, priority)
        SELECT $1, $2, a.args, $4, $5
        FROM unnest($3::jsonb[]) WITH ORDINALITY AS a(args, n)
        ORDER BY a.n
        RETURNING id AS "id: JobId"
        "#,
        kind,
        queue,
        args,
        max_attempts,
        priority,
    )
    .fetch_all(conn)
    .await
}
