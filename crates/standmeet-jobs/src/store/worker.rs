//! Workers: the processes that run jobs, as they say they are alive and what they run.

use std::time::Duration;

use sqlx::PgPool;

/// Says that `worker` is alive and runs `kinds` on `queues` (inserting its row the
/// first time). Renewed with the leases.
pub(crate) async fn worker_heartbeat(
    pool: &PgPool,
    worker: &str,
    kinds: &[String],
    queues: &[String],
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        r#"
        INSERT INTO job_workers (worker_id, kinds, queues) VALUES ($1, $2, $3)
        ON CONFLICT (worker_id) DO UPDATE
        SET kinds = EXCLUDED.kinds, queues = EXCLUDED.queues, heartbeat_at = now()
        "#,
        worker,
        kinds,
        queues,
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// Removes `worker`'s row: it stops.
pub(crate) async fn worker_remove(pool: &PgPool, worker: &str) -> Result<(), sqlx::Error> {
    sqlx::query!("DELETE FROM job_workers WHERE worker_id = $1", worker)
        .execute(pool)
        .await?;
    Ok(())
}

/// Forgets the processes silent for longer than `silent` (they died).
pub(crate) async fn worker_forget_silent(
    pool: &PgPool,
    silent: Duration,
) -> Result<u64, sqlx::Error> {
    let result = sqlx::query!(
        "DELETE FROM job_workers WHERE heartbeat_at < now() - $1 * interval '1 millisecond'",
        silent.as_millis() as f64,
    )
    .execute(pool)
    .await?;
    Ok(result.rows_affected())
}

/// The kinds some process that spoke within `live` has handlers for.
pub(crate) async fn worker_known_kinds(
    pool: &PgPool,
    live: Duration,
) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"
        SELECT DISTINCT unnest(kinds) AS "kind!" FROM job_workers
        WHERE heartbeat_at > now() - $1 * interval '1 millisecond'
        "#,
        live.as_millis() as f64,
    )
    .fetch_all(pool)
    .await
}
