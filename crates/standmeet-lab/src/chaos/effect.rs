//! `chaos.effect {n, sleep_ms?}`: a job with a side effect outside its own completion,
//! so that at-least-once delivery becomes visible.
//!
//! The handler inserts one row into `chaos_effects` in a transaction of its own (not
//! the one that completes the job), then sleeps a little, then returns. A worker killed
//! between the effect and the completion leaves the effect behind; the job is rescued
//! and runs again, and the job then has two effects: a duplicate, which is allowed.
//! A job with no effect at all, or none completed, would be a lost job.
//!
//! The output carries the attempt that completed the job, so the scenario can check
//! that the completion on record is the one of the job's last attempt (a late
//! completion from a rescued attempt must be fenced off).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use sqlx::PgPool;

use standmeet_jobs::{JobContext, JobError, JobKind};

/// Made by the chaos command in its own scratch databases, never by a migration.
pub(crate) async fn create_table(pool: &PgPool) -> Result<(), sqlx::Error> {
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS chaos_effects (
             job_id  bigint      NOT NULL,
             attempt smallint    NOT NULL,
             at      timestamptz NOT NULL DEFAULT now()
         )",
    )
    .execute(pool)
    .await?;
    Ok(())
}

pub struct ChaosEffect;

#[derive(Debug, Serialize, Deserialize)]
pub struct EffectArgs {
    /// Which job of the run this is (for people reading the Tasks panel).
    pub n: u64,
    /// How long to wait between the effect and the completion.
    #[serde(default)]
    pub sleep_ms: u64,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct EffectOutput {
    /// The attempt that completed the job.
    pub attempt: i16,
}

impl JobKind for ChaosEffect {
    const KIND: &'static str = "chaos.effect";
    type Args = EffectArgs;
    type Output = EffectOutput;

    async fn run(&self, job: JobContext, args: EffectArgs) -> Result<EffectOutput, JobError> {
        // Committed on its own, at once: a kill from here on leaves the effect behind.
        sqlx::query("INSERT INTO chaos_effects (job_id, attempt) VALUES ($1, $2)")
            .bind(job.id.0)
            .bind(job.attempt)
            .execute(job.pool())
            .await?;
        if args.sleep_ms > 0 {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(args.sleep_ms)) => {}
                _ = job.cancelled() => return Err(JobError::retry("stopped after the effect")),
            }
        }
        Ok(EffectOutput {
            attempt: job.attempt,
        })
    }
}
