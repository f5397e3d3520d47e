//! kill9: workers die mid-job, and no job is lost.
//!
//! N jobs are queued up front: a third `system.sleep` (0–300 ms), a third
//! `system.flaky` (its first attempt fails, the second completes), a third
//! `chaos.effect` (a side effect in its own transaction, then 0–300 ms of sleep). Two
//! worker processes run them, two jobs each at a time so the work lasts through the
//! kills. Every 100–600 ms one of the two, picked at random, gets `kill -9` and is
//! started again at once, K times (or until no work is left). Then both run until
//! every job is finished.
//!
//! Promises checked in the database afterwards: every job inserted is still there and
//! `completed` (the flaky ones have room to retry: 25 attempts); the completion on
//! record is the last attempt's (the output names the attempt that completed, so a
//! late completion from a rescued attempt would show); every `chaos.effect` job left
//! its effect at least once. Duplicated effects are at-least-once delivery at work:
//! counted and shown, not a failure.

use std::time::{Duration, Instant};

use rand::Rng;
use sqlx::PgPool;

use super::ledger::Ledger;
use super::process::{self, ChildProcess};
use super::{ChaosEffect, EffectArgs, Lab, Outcome};
use standmeet_jobs::JobClient;
use standmeet_jobs::builtin::{Flaky, FlakyArgs, Sleep, SleepArgs};

/// Jobs one worker runs at once: few, so that the jobs of a run last about as long
/// as the kills do, and most kills hit a worker in the middle of something.
const SLOTS_PER_WORKER: usize = 2;

pub(crate) async fn run(lab: &Lab) -> anyhow::Result<Outcome> {
    let sizes = lab.sizes;
    let (url, pool) = lab.fresh_database("chaos_kill9").await?;
    let ids = insert_jobs(&pool, sizes.kill9_jobs).await?;

    let log = lab.log_path("kill9-workers.log");
    let mut workers: [ChildProcess; 2] = [
        process::spawn_worker(&url, SLOTS_PER_WORKER, &log)?,
        process::spawn_worker(&url, SLOTS_PER_WORKER, &log)?,
    ];
    let started = Instant::now();
    let mut kills = 0;
    while kills < sizes.kill9_kills && super::unfinished_among(&pool, &ids).await? > 0 {
        let pause = rand::rng().random_range(100..=600);
        tokio::time::sleep(Duration::from_millis(pause)).await;
        let victim = rand::rng().random_range(0..workers.len());
        workers[victim].kill9().await?;
        kills += 1;
        workers[victim] = process::spawn_worker(&url, SLOTS_PER_WORKER, &log)?;
    }
    let settled = super::wait_until_finished(&pool, &ids, sizes.settle_limit).await;
    let drained = started.elapsed();
    for worker in &mut workers {
        worker.stop(Duration::from_secs(10)).await;
    }

    let inserted = ids.len() as i64;
    let ledger = Ledger::read(&pool, &ids).await?;
    let rescued = super::count_among(
        &pool,
        "SELECT count(*) FROM jobs WHERE id = ANY($1) AND errors::text LIKE '%worker lost%'",
        &ids,
    )
    .await?;
    // Attempts a killed worker had started in a claim not yet written: counted by the
    // rescuer from the claim's trace.
    let counted_deaths = super::count_among(
        &pool,
        "SELECT count(*) FROM jobs WHERE id = ANY($1)
           AND errors::text LIKE '%died or lost the database during it%'",
        &ids,
    )
    .await?;
    let panics = process::panics_in(&log);
    pool.close().await;

    let mut outcome = Outcome::default();
    outcome.figure("jobs", inserted);
    outcome.figure("kills", kills);
    outcome.figure("lost", ledger.lost(ids.len()));
    outcome.figure("not_finished", ledger.unfinished());
    outcome.figure("completed", ledger.completed);
    outcome.figure("gave_up", ledger.discarded + ledger.cancelled);
    outcome.figure("rescued", rescued);
    outcome.figure("counted_deaths", counted_deaths);
    outcome.figure("effects", ledger.effects);
    outcome.figure("duplicates", ledger.doubled_effects);
    outcome.figure("missing_effects", ledger.missing_effects);
    outcome.figure("stale_completions", ledger.stale_completions);
    outcome.figure("drain_s", (drained.as_secs_f64() * 10.0).round() / 10.0);
    outcome.figure("panics", panics);

    outcome.check(
        settled,
        format!(
            "jobs were still unfinished {} s after the kills began",
            sizes.settle_limit.as_secs()
        ),
    );
    ledger.check_finished_once(&mut outcome, ids.len());
    outcome.check(panics == 0, format!("{panics} panics in the workers' log"));
    Ok(outcome)
}

/// Queues the jobs of the run in one transaction, the three kinds interleaved (so the
/// kills land on each of them, not on whichever kind the queue reaches first); answers
/// their ids.
async fn insert_jobs(pool: &PgPool, count: usize) -> anyhow::Result<Vec<i64>> {
    let jobs = JobClient::new(pool.clone(), 1);
    let mut tx = pool.begin().await?;
    let mut ids = Vec::with_capacity(count);
    for n in 0..count {
        let (sleep_ms, effect_pause) = {
            let mut rng = rand::rng();
            (rng.random_range(0..=300), rng.random_range(0..=300))
        };
        let id = match n % 3 {
            0 => {
                jobs.insert_tx::<Sleep>(&mut tx, &SleepArgs { ms: sleep_ms })
                    .await?
            }
            1 => {
                let args = FlakyArgs {
                    fail_until_attempt: 2,
                    message: Some("chaos: the first attempt fails on purpose".into()),
                    retry_in_ms: Some(50),
                };
                jobs.insert_tx::<Flaky>(&mut tx, &args).await?
            }
            _ => {
                let args = EffectArgs {
                    n: n as u64,
                    sleep_ms: effect_pause,
                };
                jobs.insert_tx::<ChaosEffect>(&mut tx, &args).await?
            }
        };
        ids.push(id.0);
    }
    tx.commit().await?;
    Ok(ids)
}
