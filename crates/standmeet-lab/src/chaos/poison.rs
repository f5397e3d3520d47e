//! poison: jobs that kill their process are counted and discarded; the rest run on.
//!
//! Among N ordinary jobs (`system.sleep`, 0–20 ms) sit a few poison jobs, whose
//! handler takes the whole process down: `chaos.abort` aborts it, `chaos.overflow`
//! overflows its stack (both what a native crash, the OOM killer or a container's
//! memory limit do to a process: no unwinding, no goodbye). Each has `max_attempts` 3.
//! Two worker processes run the queue, and each is started again whenever it dies.
//!
//! Promises checked: every poison job ends `discarded` after exactly 3 counted
//! attempts, each with an error that says its process died during it (a claim's trace
//! counted it: "died or lost the database during it"; or, for a job an idle queue took
//! `running` at once, the rescuer did when its lease ran out: "worker lost"); every ordinary
//! job ends `completed`; the workers died at most 3 times per poison job, and once
//! the poison jobs were discarded the restarts stopped: both workers then run a last
//! batch of jobs without dying.

use std::time::{Duration, Instant};

use rand::Rng;
use sqlx::PgPool;

use super::ledger::Ledger;
use super::process::{self, ChildProcess};
use super::{Lab, Outcome};
use standmeet_jobs::builtin::{Sleep, SleepArgs};
use standmeet_jobs::{InsertOptions, JobClient, JobContext, JobError, JobKind};

/// How many times a poison job may kill a process before it is discarded.
const POISON_ATTEMPTS: i16 = 3;

/// `chaos.abort`: aborts the process that runs it.
pub struct ChaosAbort;

impl JobKind for ChaosAbort {
    const KIND: &'static str = "chaos.abort";
    const MAX_ATTEMPTS: i16 = POISON_ATTEMPTS;
    type Args = serde_json::Value;
    type Output = ();

    async fn run(&self, _job: JobContext, _args: serde_json::Value) -> Result<(), JobError> {
        eprintln!("chaos.abort: aborting this process on purpose");
        std::process::abort()
    }
}

/// `chaos.overflow`: overflows the stack of the thread that runs it, which takes the
/// process down.
pub struct ChaosOverflow;

impl JobKind for ChaosOverflow {
    const KIND: &'static str = "chaos.overflow";
    const MAX_ATTEMPTS: i16 = POISON_ATTEMPTS;
    type Args = serde_json::Value;
    type Output = u64;

    async fn run(&self, _job: JobContext, _args: serde_json::Value) -> Result<u64, JobError> {
        eprintln!("chaos.overflow: overflowing this thread's stack on purpose");
        Ok(deeper(0))
    }
}

/// Recurses with a page of stack per call until the stack runs out (the depth limit
/// is never reached; it keeps the compiler from calling this an endless recursion).
#[inline(never)]
fn deeper(depth: u64) -> u64 {
    let page = std::hint::black_box([depth as u8; 4096]);
    if depth == u64::MAX {
        return 0;
    }
    deeper(depth + 1).wrapping_add(u64::from(page[(depth % 4096) as usize]))
}

/// Jobs one worker runs at once.
const SLOTS_PER_WORKER: usize = 4;
/// The poison jobs of a run: two that abort, one that overflows its stack.
const POISON: [&str; 3] = ["chaos.abort", "chaos.overflow", "chaos.abort"];
/// The last batch, run after the poison is gone, to see that nobody dies any more.
const LAST_BATCH: usize = 50;

pub(crate) async fn run(lab: &Lab) -> anyhow::Result<Outcome> {
    let ordinary = lab.sizes.poison_ordinary_jobs;
    let (url, pool) = lab.fresh_database("chaos_poison").await?;
    let (ordinary_ids, poison_ids) = insert_jobs(&pool, ordinary).await?;
    let all: Vec<i64> = ordinary_ids.iter().chain(&poison_ids).copied().collect();

    let log = lab.log_path("poison-workers.log");
    let spawn = || {
        process::spawn_worker_with(
            &url,
            SLOTS_PER_WORKER,
            &log,
            &[("STANDMEET_JOB_LEASE_MS", "1500".into())],
        )
    };
    let mut workers: [ChildProcess; 2] = [spawn()?, spawn()?];
    let started = Instant::now();
    let mut deaths = 0usize;
    let mut last_death: Option<Instant> = None;
    let deadline = started + lab.sizes.settle_limit;
    let settled = loop {
        for worker in &mut workers {
            if worker.exited().is_some() {
                deaths += 1;
                last_death = Some(Instant::now());
                *worker = spawn()?;
            }
        }
        if super::unfinished_among(&pool, &all).await? == 0 {
            break true;
        }
        if Instant::now() >= deadline {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let drained = started.elapsed();
    let poison_done_at = Instant::now();

    // The last batch: both workers run it, and neither dies.
    let last = super::queue_noops(&pool, LAST_BATCH).await?;
    let last_ran = super::wait_until_finished(&pool, &last, Duration::from_secs(60)).await;
    let died_after = workers
        .iter_mut()
        .filter_map(|worker| worker.exited())
        .count();
    for worker in &mut workers {
        worker.stop(Duration::from_secs(10)).await;
    }

    let completed = Ledger::read(&pool, &ordinary_ids).await?.completed;
    let present = Ledger::read(&pool, &all).await?.present;
    let discarded_as_promised = super::count_among(
        &pool,
        &format!(
            "SELECT count(*) FROM jobs
             WHERE id = ANY($1) AND state = 'discarded' AND attempt = {POISON_ATTEMPTS}
               AND jsonb_array_length(errors) = {POISON_ATTEMPTS}
               AND NOT EXISTS (SELECT FROM jsonb_array_elements(errors) e
                               WHERE e ->> 'error' NOT LIKE '%died or lost the database during it%'
                                 AND e ->> 'error' NOT LIKE 'worker lost:%')"
        ),
        &poison_ids,
    )
    .await?;
    let counted_deaths = super::count_among(
        &pool,
        "SELECT count(*) FROM jobs j, jsonb_array_elements(j.errors) e
         WHERE j.id = ANY($1) AND (e ->> 'error' LIKE '%died or lost the database during it%'
                                   OR e ->> 'error' LIKE 'worker lost:%')",
        &all,
    )
    .await?;
    let panics = process::panics_in(&log);
    pool.close().await;

    let poison = poison_ids.len();
    let mut outcome = Outcome::default();
    outcome.figure("jobs", all.len());
    outcome.figure("poison", poison);
    outcome.figure("deaths", deaths);
    outcome.figure("counted_deaths", counted_deaths);
    outcome.figure("discarded", discarded_as_promised);
    outcome.figure("completed", completed);
    outcome.figure("lost", all.len() as i64 - present);
    outcome.figure("drain_s", (drained.as_secs_f64() * 10.0).round() / 10.0);
    outcome.figure(
        "last_death_s",
        last_death.map_or(0.0, |at| {
            (at.duration_since(started).as_secs_f64() * 10.0).round() / 10.0
        }),
    );
    outcome.figure("died_after", died_after);

    outcome.check(
        settled,
        format!(
            "jobs were still unfinished {} s into the run",
            lab.sizes.settle_limit.as_secs()
        ),
    );
    outcome.check(
        present == all.len() as i64,
        format!("{} jobs were lost", all.len() as i64 - present),
    );
    outcome.check(
        discarded_as_promised == poison as i64,
        format!(
            "{discarded_as_promised} of {poison} poison jobs ended discarded after {POISON_ATTEMPTS} attempts, each counted as a death"
        ),
    );
    outcome.check(
        completed == ordinary as i64,
        format!("{completed} of {ordinary} ordinary jobs completed"),
    );
    outcome.check(
        deaths >= 1 && deaths <= poison * POISON_ATTEMPTS as usize,
        format!(
            "the workers died {deaths} times for {poison} poison jobs of {POISON_ATTEMPTS} attempts"
        ),
    );
    outcome.check(
        last_ran && died_after == 0,
        format!(
            "after the poison was discarded the workers still died ({died_after}) or did not run the last batch"
        ),
    );
    outcome.check(
        last_death.is_none_or(|at| at <= poison_done_at),
        "a worker died after every job had finished",
    );
    outcome.check(panics == 0, format!("{panics} panics in the workers' log"));
    Ok(outcome)
}

/// Queues the ordinary jobs and, spread among them, the poison ones; answers both
/// lists of ids.
async fn insert_jobs(pool: &PgPool, ordinary: usize) -> anyhow::Result<(Vec<i64>, Vec<i64>)> {
    let jobs = JobClient::new(pool.clone(), 1);
    let mut tx = pool.begin().await?;
    let mut ordinary_ids = Vec::with_capacity(ordinary);
    let mut poison_ids = Vec::new();
    let every = (ordinary / (POISON.len() + 1)).max(1);
    for n in 0..ordinary {
        if n > 0 && n % every == 0 && poison_ids.len() < POISON.len() {
            let options = || InsertOptions {
                max_attempts: Some(POISON_ATTEMPTS),
                ..Default::default()
            };
            let args = serde_json::json!({ "n": n });
            let id = match POISON[poison_ids.len()] {
                "chaos.overflow" => {
                    jobs.insert_tx_with::<ChaosOverflow>(&mut tx, &args, options())
                        .await?
                }
                _ => {
                    jobs.insert_tx_with::<ChaosAbort>(&mut tx, &args, options())
                        .await?
                }
            };
            poison_ids.push(id.0);
        }
        let ms = rand::rng().random_range(0..=20);
        ordinary_ids.push(jobs.insert_tx::<Sleep>(&mut tx, &SleepArgs { ms }).await?.0);
    }
    tx.commit().await?;
    Ok((ordinary_ids, poison_ids))
}
