//! The steps a worker takes, one at a time, for the engine's own tests (feature
//! `testing`): they play a worker that claims jobs and then vanishes, answers late, or
//! is rescued, which a running engine never does on purpose. Production code never
//! turns the feature on; everything else goes through [`JobClient`](super::JobClient).

use std::time::Duration;

use sqlx::PgPool;

use super::JobId;
use super::store::{self, HeldAttempt};

pub use super::maintenance::clean_finished;
pub use super::store::{
    Delay, FINISHED_PER_MINUTE_SQL, MAX_DELAY, MAX_ERROR_CHARS, Outcome, OutputJson,
    job_record_outcomes, job_rescue_expired, job_summaries_fold,
};
pub use super::store::{SLOT_WAIT, slot_lock_key};

/// Plays a process that claims up to `limit` jobs of `queue` (of `kinds`), writes them
/// `running` under `worker` with a `lease` as a claim does for attempts still going,
/// and is never heard from again: the state a process leaves behind when it dies
/// mid-attempt. Answers the jobs it took.
pub async fn claim_as_ghost(
    pool: &PgPool,
    queue: &str,
    limit: i64,
    kinds: &[String],
    worker: &str,
    lease: Duration,
) -> Result<Vec<JobId>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let (jobs, rows) = store::job_claim(&mut tx, queue, limit, kinds).await?;
    let running: Vec<HeldAttempt> = jobs.iter().map(store::FetchedJob::attempt_held).collect();
    if !running.is_empty() {
        store::job_record_claimed(&mut tx, worker, lease, &[], &running, &rows, &[], None).await?;
    }
    tx.commit().await?;
    Ok(running.into_iter().map(|attempt| attempt.id).collect())
}

/// Plays a process that claims up to `limit` jobs of `queue`, leaves the claim's trace
/// as a real claim does, starts their attempts and dies before it writes anything (its
/// transaction rolls back, as PostgreSQL ends it when the connection goes). Answers the
/// jobs it took.
pub async fn claim_and_die(
    pool: &PgPool,
    queue: &str,
    limit: i64,
    kinds: &[String],
    worker: &str,
    lease: Duration,
) -> Result<Vec<JobId>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let (jobs, rows) = store::job_claim(&mut tx, queue, limit, kinds).await?;
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    let attempts: Vec<HeldAttempt> = jobs.iter().map(store::FetchedJob::attempt_held).collect();
    store::job_claim_trace(pool, &rows.xact, queue, worker, &attempts, lease).await?;
    tx.rollback().await?;
    Ok(attempts.into_iter().map(|attempt| attempt.id).collect())
}

/// Fires the schedules due at `now` as an engine's periodic tick does (`periodic`),
/// answering what each firing inserted.
pub async fn fire_due(
    pool: &PgPool,
    registry: &super::Registry,
    tz: &jiff::tz::TimeZone,
    now: jiff::Timestamp,
) -> Result<Vec<(String, super::Inserted)>, super::Error> {
    super::periodic::fire_due(pool, registry, tz, now).await
}
