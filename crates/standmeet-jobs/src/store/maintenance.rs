//! The engine's chores: renewing leases, making due jobs available, taking back jobs
//! whose holder went silent, and deleting finished jobs past their retention.

use std::time::Duration;

use sqlx::PgPool;

use crate::JobId;

use super::HeldAttempt;
use super::max_delay_ms;

/// What a lease renewal found about one held attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Renewed {
    pub id: JobId,
    /// An admin asked to cancel it (its notification may have been lost).
    pub cancel_requested: bool,
}

/// Renews the leases of exactly `held`, the attempts this process still has in flight
/// (running, or with an outcome not yet written), and only while each is still
/// `running` at that attempt under `worker`. Answers those it renewed; an attempt
/// missing from the answer is no longer this process's (rescued, cancelled, finished).
pub(crate) async fn job_renew_leases(
    pool: &PgPool,
    worker: &str,
    held: &[HeldAttempt],
    lease: Duration,
) -> Result<Vec<Renewed>, sqlx::Error> {
    let ids: Vec<i64> = held.iter().map(|h| h.id.0).collect();
    let attempts: Vec<i16> = held.iter().map(|h| h.attempt).collect();
    let rows = sqlx::query!(
        r#"
        UPDATE jobs AS j
        SET lease_expires_at = now() + $2 * interval '1 millisecond'
        FROM unnest($3::bigint[], $4::smallint[]) AS h(id, attempt)
        WHERE j.id = h.id AND j.attempt = h.attempt
          AND j.state = 'running' AND j.attempted_by = $1
        RETURNING j.id AS "id: JobId", j.cancel_requested_at IS NOT NULL AS "cancel_requested!"
        "#,
        worker,
        lease.as_millis() as f64,
        &ids,
        &attempts,
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| Renewed {
            id: row.id,
            cancel_requested: row.cancel_requested,
        })
        .collect())
}

/// Makes up to `limit` due `scheduled` and `retryable` jobs `available` (a trigger
/// wakes their queues). Answers how many.
///
/// The picked ids reach the `UPDATE` as an array (`id = ANY(ARRAY(…))`), not as a
/// join: for a join the planner may hash the whole table, finished rows and all, on
/// every pass (measured: 38 ms instead of 9 ms to take 1,000 of 100,000 jobs), so the
/// cost would grow with the rows kept. The array makes it primary-key lookups. The
/// rescuer and the cleaner below do the same for the same reason.
pub(crate) async fn job_schedule_due(pool: &PgPool, limit: i64) -> Result<u64, sqlx::Error> {
    let result = sqlx::query!(
        r#"
        WITH due AS (
            SELECT id FROM jobs
            WHERE state IN ('scheduled', 'retryable') AND scheduled_at <= now()
            ORDER BY scheduled_at
            LIMIT $1
            FOR UPDATE SKIP LOCKED
        )
        UPDATE jobs SET state = 'available'
        WHERE id = ANY(ARRAY(SELECT id FROM due))
        "#,
        limit,
    )
    .execute(pool)
    .await?;
    Ok(result.rows_affected())
}

/// Takes back up to `limit` running jobs whose lease ran out (their process died or
/// lost the database): `cancelled` if an admin had asked, `discarded` when out of
/// attempts, else `retryable` after the backoff (`job_backoff`, unit `retry_base`).
/// Safe to run in several processes at once. Answers how many.
pub async fn job_rescue_expired(
    pool: &PgPool,
    limit: i64,
    retry_base: Duration,
) -> Result<u64, sqlx::Error> {
    let result = sqlx::query!(
        r#"
        WITH lost AS (
            SELECT id FROM jobs
            WHERE state = 'running' AND lease_expires_at < now()
            ORDER BY lease_expires_at
            LIMIT $1
            FOR UPDATE SKIP LOCKED
        )
        UPDATE jobs AS j
        SET state = CASE WHEN j.cancel_requested_at IS NOT NULL THEN 'cancelled'::job_state
                         WHEN j.attempt >= j.max_attempts THEN 'discarded'::job_state
                         ELSE 'retryable'::job_state END,
            errors = j.errors || jsonb_build_array(jsonb_build_object(
                'attempt', j.attempt, 'at', now(),
                'error', 'worker lost: ' || coalesce(j.attempted_by, 'unknown worker')
                         || ' stopped renewing its lease')),
            scheduled_at = CASE WHEN j.cancel_requested_at IS NULL AND j.attempt < j.max_attempts
                                THEN now() + job_backoff(j.attempt, $2, $3)
                                ELSE j.scheduled_at END,
            finalized_at = CASE WHEN j.cancel_requested_at IS NOT NULL OR j.attempt >= j.max_attempts
                                THEN now() END,
            attempted_by = NULL,
            lease_expires_at = NULL
        WHERE j.id = ANY(ARRAY(SELECT id FROM lost))
        "#,
        limit,
        retry_base.as_millis() as f64,
        max_delay_ms(),
    )
    .execute(pool)
    .await?;
    Ok(result.rows_affected())
}

/// How many finished jobs are past their retention for sure, by the summaries:
/// those counted under a minute (or hour, or day: see `job_minute_bucket`) that ended
/// before the cutoff. An under-count by at most the one bucket the cutoff falls in, so
/// that the cleaner, which stops once it deleted this many, never walks every block of
/// ids for jobs that are not due; the rest are due at a later turn.
pub(crate) async fn job_finished_due(
    pool: &PgPool,
    keep_completed: Duration,
    keep_discarded: Duration,
) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        r#"
        SELECT coalesce(sum(jobs), 0)::bigint AS "due!"
        FROM job_finished_minutes
        WHERE minute < job_minute_bucket(date_trunc('minute',
                  now() - CASE WHEN state = 'discarded' THEN $2::float8 ELSE $1::float8 END
                          * interval '1 millisecond'))
        "#,
        keep_completed.as_millis() as f64,
        keep_discarded.as_millis() as f64,
    )
    .fetch_one(pool)
    .await
}

/// Deletes the finished jobs past their retention in up to `blocks` blocks of ids that
/// hold finished jobs (by `job_finished_blocks`), from block `from` on, oldest first,
/// each block read through the primary key. Answers how many it deleted and the block
/// to go on from, or `None` when it reached the newest.
///
/// Counts what it deletes in the summaries itself, in the same statement (see
/// `COUNTS_ITSELF`). Each job is deleted only if it is still finished and due when the
/// delete reaches it (an operator may have retried it meanwhile).
pub(crate) async fn job_delete_finished(
    pool: &PgPool,
    keep_completed: Duration,
    keep_discarded: Duration,
    from: i64,
    blocks: i64,
) -> Result<(u64, Option<i64>), sqlx::Error> {
    let row = sqlx::query!(
        r#"
        WITH candidates AS (
            SELECT block FROM job_finished_blocks
            WHERE block >= $3
            GROUP BY block HAVING sum(jobs) > 0
            ORDER BY block LIMIT $4
        ), gone AS (
            DELETE FROM jobs
            WHERE id = ANY(ARRAY(
                    SELECT j.id FROM candidates b,
                    LATERAL (SELECT id, state, finalized_at FROM jobs
                             WHERE id >= job_block_first_id(b.block)
                               AND id < job_block_first_id(b.block + 1)
                               AND finalized_at IS NOT NULL) j
                    WHERE j.finalized_at < now() - CASE WHEN j.state = 'discarded' THEN $2::float8
                                                        ELSE $1::float8 END * interval '1 millisecond'))
              AND finalized_at < now() - CASE WHEN state = 'discarded' THEN $2::float8
                                              ELSE $1::float8 END * interval '1 millisecond'
              AND (SELECT set_config('standmeet.counts_itself', 'on', true)) IS NOT NULL
            RETURNING id, queue, kind, state, finalized_at
        ), minutes AS (
            INSERT INTO job_finished_minutes AS m (minute, queue, kind, state, writer, jobs)
            SELECT job_minute_bucket(date_trunc('minute', finalized_at)), queue, kind, state,
                   pg_backend_pid(), -count(*)
            FROM gone GROUP BY 1, 2, 3, 4
            ON CONFLICT (minute, queue, kind, state, writer) DO UPDATE SET jobs = m.jobs + excluded.jobs
        ), blocks AS (
            INSERT INTO job_finished_blocks AS b (block, queue, kind, state, writer, jobs)
            SELECT job_block(id), queue, kind, state, pg_backend_pid(), -count(*)::integer
            FROM gone GROUP BY 1, 2, 3, 4
            ON CONFLICT (block, queue, kind, state, writer) DO UPDATE SET jobs = b.jobs + excluded.jobs
        )
        SELECT (SELECT count(*) FROM gone) AS "deleted!",
               (SELECT count(*) FROM candidates) AS "looked_at!",
               (SELECT max(block) FROM candidates) AS newest
        "#,
        keep_completed.as_millis() as f64,
        keep_discarded.as_millis() as f64,
        from,
        blocks,
    )
    .fetch_one(pool)
    .await?;
    let next = (row.looked_at >= blocks)
        .then_some(row.newest)
        .flatten()
        .map(|newest| newest + 1);
    Ok((row.deleted as u64, next))
}

/// Folds the summaries of finished jobs (`job_summaries_fold`: the rows of past
/// minutes and settled blocks into one per key, old minutes into hours and days, and
/// away what adds up to nothing). Answers how many rows it folded.
pub async fn job_summaries_fold(pool: &PgPool) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(r#"SELECT job_summaries_fold() AS "folded!""#)
        .fetch_one(pool)
        .await
}
