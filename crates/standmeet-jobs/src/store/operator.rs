//! What an operator does to jobs: cancel, retry and delete, one job or many, each in a
//! transaction that waits at most [`OPERATOR_LOCK_WAIT`] for a row a claim holds.

use std::time::Duration;

use sqlx::{PgConnection, PgPool};

use crate::{JobId, JobState};

/// The longest an operator's action (cancel, retry, delete) waits for a job's row: a
/// claim holds its jobs' rows for a moment, but a frozen process's claim holds them
/// until PostgreSQL ends it (up to a lease). The action answers within 2 s instead:
/// done, or SQLSTATE 55P03 (`lock_not_available`), which StandMeet answers with 409 and
/// words (see `error`).
pub(super) const OPERATOR_LOCK_WAIT: Duration = Duration::from_secs(1);

/// Begins an operator's action with [`OPERATOR_LOCK_WAIT`] as its lock timeout.
async fn begin_operator_action(
    pool: &PgPool,
) -> Result<sqlx::Transaction<'static, sqlx::Postgres>, sqlx::Error> {
    pool.begin_with(format!(
        "BEGIN; SET LOCAL lock_timeout = {}",
        OPERATOR_LOCK_WAIT.as_millis()
    ))
    .await
}

/// What an admin's cancel did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CancelOutcome {
    /// It had not started: now `cancelled`.
    Cancelled,
    /// It is running: its holder was asked to stop the attempt.
    Requested,
    /// It had already finished, in this state.
    AlreadyFinal(JobState),
    /// No job has that id.
    NotFound,
}

/// Cancels a job: at once when it is not running, else by asking its holder (the row
/// records the request, and a notification reaches the holder now). One job of
/// [`job_cancel_many`].
pub(crate) async fn job_cancel(pool: &PgPool, id: JobId) -> Result<CancelOutcome, sqlx::Error> {
    let cancels = cancel_in_one_transaction(pool, &[id]).await?;
    Ok(if !cancels.cancelled.is_empty() {
        CancelOutcome::Cancelled
    } else if !cancels.requested.is_empty() {
        CancelOutcome::Requested
    } else {
        match cancels.unchanged.first() {
            Some((_, Some(state))) => CancelOutcome::AlreadyFinal(*state),
            _ => CancelOutcome::NotFound,
        }
    })
}

/// What an admin's retry did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RetryOutcome {
    /// It is `available` again, with room for one more attempt.
    Retried,
    /// It is in a state a retry does not apply to.
    NotRetryable(JobState),
    /// No job has that id.
    NotFound,
}

/// Makes a `retryable`, `discarded` or `cancelled` job `available` now, with room for
/// at least one more attempt.
pub(crate) async fn job_retry(pool: &PgPool, id: JobId) -> Result<RetryOutcome, sqlx::Error> {
    Ok(match the_one(&job_retry_many(pool, &[id]).await?) {
        Ok(()) => RetryOutcome::Retried,
        Err(Some(state)) => RetryOutcome::NotRetryable(state),
        Err(None) => RetryOutcome::NotFound,
    })
}

/// What deleting a job did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeleteOutcome {
    /// The job is deleted.
    Deleted,
    /// It has not finished (in this state); only finished jobs are deleted.
    NotFinished(JobState),
    /// No job has that id.
    NotFound,
}

/// Deletes job `id` if it is finished (completed, discarded, cancelled).
pub(crate) async fn job_delete(pool: &PgPool, id: JobId) -> Result<DeleteOutcome, sqlx::Error> {
    Ok(match the_one(&job_delete_many(pool, &[id]).await?) {
        Ok(()) => DeleteOutcome::Deleted,
        Err(Some(state)) => DeleteOutcome::NotFinished(state),
        Err(None) => DeleteOutcome::NotFound,
    })
}

/// What a bulk action did: the jobs it changed, and the others with the state that kept
/// them as they were (`None`: no such job).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BulkOutcome {
    /// The jobs it changed.
    pub changed: Vec<JobId>,
    /// The jobs it left as they were, with their state (none: no such job).
    pub unchanged: Vec<(JobId, Option<JobState>)>,
}

/// Ends a bulk action whose statement changed `changed` of `ids`: reads what kept the
/// others as they were, and commits.
async fn finish_bulk(
    mut tx: sqlx::Transaction<'static, sqlx::Postgres>,
    ids: &[i64],
    changed: Vec<i64>,
) -> Result<BulkOutcome, sqlx::Error> {
    let unchanged = unchanged_among(&mut tx, ids, &changed).await?;
    tx.commit().await?;
    Ok(BulkOutcome {
        changed: changed.into_iter().map(JobId).collect(),
        unchanged,
    })
}

/// What a bulk action did to its one job: `Ok` changed, else the state that kept it
/// (`None`: no such job).
fn the_one(outcome: &BulkOutcome) -> Result<(), Option<JobState>> {
    match outcome.unchanged.first() {
        None => Ok(()),
        Some((_, state)) => Err(*state),
    }
}

/// The states of `ids` other than `changed`, read in the bulk action's transaction.
async fn unchanged_among(
    tx: &mut PgConnection,
    ids: &[i64],
    changed: &[i64],
) -> Result<Vec<(JobId, Option<JobState>)>, sqlx::Error> {
    let others: Vec<i64> = ids
        .iter()
        .copied()
        .filter(|id| !changed.contains(id))
        .collect();
    let found = sqlx::query!(
        r#"SELECT id, state AS "state: JobState" FROM jobs WHERE id = ANY($1)"#,
        &others
    )
    .fetch_all(&mut *tx)
    .await?;
    Ok(others
        .into_iter()
        .map(|id| {
            let state = found.iter().find(|row| row.id == id).map(|row| row.state);
            (JobId(id), state)
        })
        .collect())
}

/// [`job_retry`] for many jobs, in one transaction.
pub(crate) async fn job_retry_many(
    pool: &PgPool,
    ids: &[JobId],
) -> Result<BulkOutcome, sqlx::Error> {
    let ids: Vec<i64> = ids.iter().map(|id| id.0).collect();
    let mut tx = begin_operator_action(pool).await?;
    let changed = sqlx::query_scalar!(
        r#"
        UPDATE jobs
        SET state = 'available', scheduled_at = now(), finalized_at = NULL,
            max_attempts = greatest(max_attempts, attempt + 1),
            cancel_requested_at = NULL
        WHERE id = ANY($1) AND state IN ('retryable', 'discarded', 'cancelled')
          -- A finished job whose unique key another unfinished job holds stays as it
          -- is: running it again would be the second job the key exists to prevent.
          AND (unique_key IS NULL OR state = 'retryable' OR NOT EXISTS (
                SELECT 1 FROM jobs holder
                WHERE holder.unique_key = jobs.unique_key
                  AND holder.state IN ('available', 'scheduled', 'running', 'retryable')))
        RETURNING id
        "#,
        &ids
    )
    .fetch_all(&mut *tx)
    .await?;
    finish_bulk(tx, &ids, changed).await
}

/// [`job_cancel`] for many jobs, in one transaction: those that have not started are
/// `cancelled` at once, the running ones' holders are asked to stop them.
pub(crate) async fn job_cancel_many(
    pool: &PgPool,
    ids: &[JobId],
) -> Result<BulkOutcome, sqlx::Error> {
    let cancels = cancel_in_one_transaction(pool, ids).await?;
    let mut changed = cancels.cancelled;
    changed.extend(cancels.requested);
    Ok(BulkOutcome {
        changed,
        unchanged: cancels.unchanged,
    })
}

/// What cancelling some jobs did to each.
struct Cancels {
    /// They had not started: now `cancelled`.
    cancelled: Vec<JobId>,
    /// They run: their holders were asked to stop the attempts.
    requested: Vec<JobId>,
    /// Finished already, or no such job.
    unchanged: Vec<(JobId, Option<JobState>)>,
}

async fn cancel_in_one_transaction(pool: &PgPool, ids: &[JobId]) -> Result<Cancels, sqlx::Error> {
    let ids: Vec<i64> = ids.iter().map(|id| id.0).collect();
    let mut tx = begin_operator_action(pool).await?;
    let cancelled = sqlx::query_scalar!(
        r#"
        UPDATE jobs
        SET state = 'cancelled', finalized_at = now(),
            errors = errors || jsonb_build_array(jsonb_build_object(
                'attempt', attempt, 'at', now(), 'error', 'cancelled by an admin before it ran'))
        WHERE id = ANY($1) AND state IN ('available', 'scheduled', 'retryable')
        RETURNING id
        "#,
        &ids
    )
    .fetch_all(&mut *tx)
    .await?;
    let requested = sqlx::query_scalar!(
        r#"
        UPDATE jobs SET cancel_requested_at = now()
        WHERE id = ANY($1) AND state = 'running'
        RETURNING id
        "#,
        &ids
    )
    .fetch_all(&mut *tx)
    .await?;
    sqlx::query!(
        "SELECT pg_notify($1, id::text) FROM unnest($2::bigint[]) AS asked(id)",
        crate::channels::CANCEL,
        &requested
    )
    .execute(&mut *tx)
    .await?;
    let changed: Vec<i64> = cancelled.iter().chain(&requested).copied().collect();
    let unchanged = unchanged_among(&mut tx, &ids, &changed).await?;
    tx.commit().await?;
    Ok(Cancels {
        cancelled: cancelled.into_iter().map(JobId).collect(),
        requested: requested.into_iter().map(JobId).collect(),
        unchanged,
    })
}

/// [`job_delete`] for many jobs, in one transaction: the finished ones go.
pub(crate) async fn job_delete_many(
    pool: &PgPool,
    ids: &[JobId],
) -> Result<BulkOutcome, sqlx::Error> {
    let ids: Vec<i64> = ids.iter().map(|id| id.0).collect();
    let mut tx = begin_operator_action(pool).await?;
    let changed = sqlx::query_scalar!(
        r#"
        DELETE FROM jobs
        WHERE id = ANY($1) AND state IN ('completed', 'discarded', 'cancelled')
        RETURNING id
        "#,
        &ids
    )
    .fetch_all(&mut *tx)
    .await?;
    finish_bulk(tx, &ids, changed).await
}
