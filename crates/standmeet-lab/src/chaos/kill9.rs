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
    let present =
        super::count_among(&pool, "SELECT count(*) FROM jobs WHERE id = ANY($1)", &ids).await?;
    let by_state: Vec<(String, i64)> =
        sqlx::query_as("SELECT state::text, count(*) FROM jobs WHERE id = ANY($1) GROUP BY 1")
            .bind(&ids[..])
            .fetch_all(&pool)
            .await?;
    let in_state = |state: &str| {
        by_state
            .iter()
            .find(|(name, _)| name == state)
            .map_or(0, |(_, n)| *n)
    };
    let completed = in_state("completed");
    let gave_up = in_state("discarded") + in_state("cancelled");
    let not_finished = present - completed - gave_up;
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
    // Flaky and effect jobs say which attempt completed them: it must be the last one.
    let stale_completions = super::count_among(
        &pool,
        "SELECT count(*) FROM jobs
         WHERE id = ANY($1) AND state = 'completed' AND kind IN ('system.flaky', 'chaos.effect')
           AND (output ->> 'attempt')::int IS DISTINCT FROM attempt",
        &ids,
    )
    .await?;
    let (missing_effects, duplicated, effects): (i64, i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE effects = 0),
                count(*) FILTER (WHERE effects > 1),
                coalesce(sum(effects), 0)::bigint
         FROM (SELECT j.id, count(e.job_id) AS effects
               FROM jobs j LEFT JOIN chaos_effects e ON e.job_id = j.id
               WHERE j.id = ANY($1) AND j.kind = 'chaos.effect'
               GROUP BY j.id) AS per_job",
    )
    .bind(&ids[..])
    .fetch_one(&pool)
    .await?;
    let panics = process::panics_in(&log);
    pool.close().await;

    let mut outcome = Outcome::default();
    outcome.figure("jobs", inserted);
    outcome.figure("kills", kills);
    outcome.figure("lost", inserted - present);
    outcome.figure("not_finished", not_finished);
    outcome.figure("completed", completed);
    outcome.figure("gave_up", gave_up);
    outcome.figure("rescued", rescued);
    outcome.figure("counted_deaths", counted_deaths);
    outcome.figure("effects", effects);
    outcome.figure("duplicates", duplicated);
    outcome.figure("missing_effects", missing_effects);
    outcome.figure("stale_completions", stale_completions);
    outcome.figure("drain_s", (drained.as_secs_f64() * 10.0).round() / 10.0);
    outcome.figure("panics", panics);

    outcome.check(
        settled,
        format!(
            "jobs were still unfinished {} s after the kills began",
            sizes.settle_limit.as_secs()
        ),
    );
    outcome.check(
        present == inserted,
        format!("{} of {inserted} jobs were lost", inserted - present),
    );
    outcome.check(
        not_finished == 0,
        format!("{not_finished} jobs never finished"),
    );
    outcome.check(
        gave_up == 0,
        format!("{gave_up} jobs were discarded or cancelled instead of completed"),
    );
    outcome.check(
        stale_completions == 0,
        format!(
            "{stale_completions} jobs carry the completion of an attempt that was not their last"
        ),
    );
    outcome.check(
        missing_effects == 0,
        format!("{missing_effects} chaos.effect jobs left no effect"),
    );
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
