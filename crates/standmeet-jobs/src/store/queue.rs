//! Queues: their figures by state, and the pauses every process obeys.

use sqlx::PgPool;

use crate::JobState;

/// One (queue, state) pair's figures, for the queues page.
#[derive(Clone, Debug)]
pub(crate) struct QueueStateCount {
    pub queue: String,
    pub state: JobState,
    pub count: i64,
    /// Of these, finished this minute or in the four before it.
    pub finished_last_5m: i64,
    /// Seconds since the oldest of these became due (`available` only).
    pub oldest_due_age_s: Option<f64>,
}

/// How many jobs each queue has in each state, how many of them finished in the last
/// five minutes, and how long the oldest available one has been due: the unfinished
/// jobs counted through their indexes (they are few), the finished ones read from their
/// summaries (`job_finished_minutes`), so the figures cost the same with a million jobs
/// kept.
pub(crate) async fn queue_state_counts(pool: &PgPool) -> Result<Vec<QueueStateCount>, sqlx::Error> {
    sqlx::query_as!(
        QueueStateCount,
        r#"
        WITH unfinished AS (
            -- An index-only scan of jobs_unfinished_queue_kind_idx.
            SELECT queue, state, count(*) AS jobs
            FROM jobs WHERE state IN ('available', 'scheduled', 'running', 'retryable')
            GROUP BY queue, state
        ), oldest AS (
            -- The fetch index, one entry per available job.
            SELECT queue, min(scheduled_at) AS due
            FROM jobs WHERE state = 'available'
            GROUP BY queue
        )
        SELECT u.queue AS "queue!", u.state AS "state!: JobState", u.jobs AS "count!",
               0::bigint AS "finished_last_5m!",
               CASE WHEN u.state = 'available'
                    THEN greatest(extract(epoch FROM now() - o.due), 0)::float8 END
                   AS oldest_due_age_s
        FROM unfinished u LEFT JOIN oldest o ON o.queue = u.queue
        UNION ALL
        SELECT queue, state, sum(jobs)::bigint,
               coalesce(sum(jobs) FILTER (WHERE minute >= date_trunc('minute', now())
                                                          - interval '4 minutes'), 0)::bigint,
               NULL::float8
        FROM job_finished_minutes
        GROUP BY queue, state HAVING sum(jobs) <> 0
        "#
    )
    .fetch_all(pool)
    .await
}

/// The paused queues, by name.
pub(crate) async fn queue_paused(pool: &PgPool) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar!("SELECT queue FROM job_queue_pauses ORDER BY queue")
        .fetch_all(pool)
        .await
}

/// Pauses `queue` (staying paused when it already was).
pub(crate) async fn queue_pause(pool: &PgPool, queue: &str) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO job_queue_pauses (queue) VALUES ($1) ON CONFLICT (queue) DO NOTHING",
        queue
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// Resumes `queue`, and in the same transaction wakes its producers in every process
/// (the insert channel), so that the jobs that waited run at once.
pub(crate) async fn queue_resume(pool: &PgPool, queue: &str) -> Result<(), sqlx::Error> {
    let mut tx = pool.begin().await?;
    sqlx::query!("DELETE FROM job_queue_pauses WHERE queue = $1", queue)
        .execute(&mut *tx)
        .await?;
    sqlx::query!("SELECT pg_notify($1, $2)", crate::channels::INSERT, queue)
        .execute(&mut *tx)
        .await?;
    tx.commit().await
}
