//! The steps a worker takes, for the engine's own tests only: they play a worker that
//! fetches jobs and then vanishes, answers late, or is rescued, which a running engine
//! never does on purpose. Nothing in StandMeet calls this (`tests/architecture.rs`
//! checks that); everything else goes through [`JobClient`](super::JobClient).

#[doc(hidden)]
pub use super::claim::{SLOT_WAIT, slot_lock_key};
#[doc(hidden)]
pub use super::store::{
    FINISHED_PER_MINUTE_SQL, MAX_DELAY, MAX_ERROR_CHARS, Outcome, job_delete_finished,
    job_fetch_available, job_record_outcomes, job_rescue_expired,
};

/// Plays a process that claims up to `limit` jobs of `queue`, leaves the claim's trace
/// as a real claim does, starts their attempts and dies before it writes anything (its
/// transaction rolls back, as PostgreSQL ends it when the connection goes). Answers the
/// jobs it took.
#[doc(hidden)]
pub async fn claim_and_die(
    pool: &sqlx::PgPool,
    queue: &str,
    limit: i64,
    kinds: &[String],
    worker: &str,
    lease: std::time::Duration,
) -> Result<Vec<super::JobId>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let (jobs, rows) = super::store::job_claim(&mut tx, queue, limit, kinds).await?;
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    let attempts: Vec<super::store::HeldAttempt> = jobs
        .iter()
        .map(|job| super::store::HeldAttempt {
            id: job.id,
            attempt: job.attempt,
        })
        .collect();
    super::store::job_claim_trace(pool, &rows.xact, queue, worker, &attempts, lease).await?;
    tx.rollback().await?;
    Ok(jobs.into_iter().map(|job| job.id).collect())
}
