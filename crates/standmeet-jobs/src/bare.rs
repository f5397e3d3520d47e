//! The bare limit (feature `bench`): the two statements of the engine's claim path, the
//! claim by row lock and its write, run back to back in their transaction with nothing
//! else: no handler, no trace, no claim slot, no window, no waiter. `connections` tasks
//! do so at once until the queue is empty. What they reach is what this database can do
//! the engine's way; the benchmark sets the engine's drain beside it, measured on the
//! same jobs in the same run.

use std::time::Duration;

use sqlx::PgPool;

use crate::JobState;
use crate::store::{self, Outcome, OutputJson};

/// Takes every available job of `queue` (of `kinds`) and records it `completed` with a
/// `null` output (a no-op's), `batch` at a time on each of `connections` connections,
/// sending the terminal notification as the engine does. Answers how many it recorded.
pub async fn drain_bare(
    pool: &PgPool,
    queue: &str,
    kinds: &[String],
    batch: i64,
    connections: usize,
) -> Result<u64, sqlx::Error> {
    let null = OutputJson::of(&()).expect("the unit value prints as JSON null");
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..connections {
        let (pool, queue, kinds) = (pool.clone(), queue.to_string(), kinds.to_vec());
        let null = null.clone();
        tasks.spawn(async move {
            let mut recorded = 0u64;
            loop {
                let mut tx = pool.begin().await?;
                let (jobs, rows) = store::job_claim(&mut tx, &queue, batch, &kinds).await?;
                if jobs.is_empty() {
                    tx.rollback().await?;
                    return Ok::<u64, sqlx::Error>(recorded);
                }
                let outcomes: Vec<Outcome> = jobs
                    .iter()
                    .map(|job| Outcome {
                        id: job.id,
                        attempt: job.attempt,
                        max_attempts: job.max_attempts,
                        state: JobState::Completed,
                        output: Some(null.clone()),
                        error: None,
                        delay: None,
                        give_back_attempt: false,
                    })
                    .collect();
                let written = store::job_record_claimed(
                    &mut tx,
                    "bare",
                    Duration::from_secs(30),
                    &outcomes,
                    &[],
                    &rows,
                    &[],
                    None,
                )
                .await?;
                tx.commit().await?;
                recorded += written.len() as u64;
            }
        });
    }
    let mut recorded = 0;
    while let Some(done) = tasks.join_next().await {
        recorded += done.expect("a bare drain task panicked")?;
    }
    Ok(recorded)
}
