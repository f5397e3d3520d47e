//! freeze: a process freezes mid-drain (SIGSTOP), and its jobs are not held hostage.
//!
//! Two worker processes drain N jobs (`system.sleep` of 5 ms, and one in a hundred of
//! 2 s, which outlasts its claim's window and is written `running`). When half of
//! them are done, one worker is frozen with SIGSTOP and left frozen: its connections
//! stay open and silent, its claims keep their row locks, its running jobs their lease,
//! as with a paused VM or a process cut off without a reset. An admin then cancels a
//! job the frozen process had claimed.
//!
//! Promises checked: the other worker completes every job within the lease plus 15 s
//! of the freeze (PostgreSQL ends the frozen claims when they sit idle for a lease;
//! the rescuer counts their attempts and takes back the running ones); the admin's
//! cancel answers within 2 s (done, or 409 with words: the row is held); then the
//! frozen worker is thawed (SIGCONT): it writes nothing over the other's work (every
//! job row is as it was before the thaw, checked after its lease renewal has run
//! twice), and it carries on (with the other worker stopped, it runs a new batch).

use std::time::{Duration, Instant};

use sqlx::PgPool;

use super::ledger::Ledger;
use super::process::{self, ChildProcess};
use super::{Lab, Outcome};
use standmeet::error::AppError;
use standmeet_jobs::builtin::{Sleep, SleepArgs};
use standmeet_jobs::{CancelOutcome, JobClient, JobId};

/// The lease of the two workers.
const LEASE: Duration = Duration::from_secs(3);
/// How long after the lease every job must be done.
const SETTLE_AFTER_LEASE: Duration = Duration::from_secs(15);
const SLOTS_PER_WORKER: usize = 64;
/// An operator's cancel answers within this.
const CANCEL_LIMIT: Duration = Duration::from_secs(2);
/// The batch the thawed worker runs alone.
const LAST_BATCH: usize = 200;

pub(crate) async fn run(lab: &Lab) -> anyhow::Result<Outcome> {
    let total = lab.sizes.freeze_jobs;
    let (url, pool) = lab.fresh_database("chaos_freeze").await?;
    let ids = insert_jobs(&pool, total).await?;
    let log = lab.log_path("freeze-workers.log");
    let spawn = || {
        process::spawn_worker_with(
            &url,
            SLOTS_PER_WORKER,
            &log,
            &[("STANDMEET_JOB_LEASE_MS", LEASE.as_millis().to_string())],
        )
    };
    let mut frozen: ChildProcess = spawn()?;
    let mut other: ChildProcess = spawn()?;
    let started = Instant::now();

    // Mid-drain: half done.
    let half = (total / 2) as i64;
    while done_among(&pool, &ids).await? < half {
        anyhow::ensure!(
            started.elapsed() < lab.sizes.settle_limit,
            "the drain did not reach half of its jobs"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    frozen.freeze()?;
    let frozen_at = Instant::now();
    let done_at_freeze = done_among(&pool, &ids).await?;
    let rate_before = done_at_freeze as f64 / frozen_at.duration_since(started).as_secs_f64();
    let pid = frozen.pid().unwrap_or_default();
    let ours = format!("%:{pid}:%");

    // An admin cancels a job the frozen process holds: one in a claim of its (locked)
    // if it has one open, else one it runs.
    let held_in_claim: Option<i64> =
        sqlx::query_scalar("SELECT unnest(jobs) FROM job_claims WHERE worker LIKE $1 LIMIT 1")
            .bind(&ours)
            .fetch_optional(&pool)
            .await?;
    let held_running: Option<i64> = sqlx::query_scalar(
        "SELECT id FROM jobs WHERE state = 'running' AND attempted_by LIKE $1 LIMIT 1",
    )
    .bind(&ours)
    .fetch_optional(&pool)
    .await?;
    let target = held_in_claim.or(held_running);
    let client = JobClient::new(pool.clone(), 1);
    let (cancel_answer, cancel_took) = match target {
        Some(id) => {
            let asked = Instant::now();
            let answer = client.cancel(JobId(id)).await;
            let took = asked.elapsed();
            let answer = match answer {
                Ok(CancelOutcome::Cancelled) => "cancelled".to_string(),
                Ok(CancelOutcome::Requested) => "requested".to_string(),
                Ok(other) => format!("{other:?}"),
                Err(err) => {
                    let err = AppError::from(err);
                    let status = err.status().as_u16();
                    let words = err.public_message();
                    if status == 409 && words.contains("not answering") {
                        "409".to_string()
                    } else {
                        format!("{status} {words}")
                    }
                }
            };
            (answer, Some(took))
        }
        None => ("no job held".to_string(), None),
    };

    // Every job done by the other worker, within the lease plus 15 s.
    let limit = LEASE + SETTLE_AFTER_LEASE;
    let settled =
        super::wait_until_finished(&pool, &ids, limit.saturating_sub(frozen_at.elapsed())).await;
    let settled_in = frozen_at.elapsed();
    let unfinished_then = super::unfinished_among(&pool, &ids).await?;
    // Late or not, the thaw is tried on a finished drain.
    let finished = settled || super::wait_until_finished(&pool, &ids, lab.sizes.settle_limit).await;

    // Thaw the frozen one: it must write nothing over the other's work.
    let before = snapshot(&pool, &ids).await?;
    let thawed_at = sqlx::query_scalar::<_, time::OffsetDateTime>("SELECT now()")
        .fetch_one(&pool)
        .await?;
    frozen.thaw()?;
    let renewed_twice = wait_for_heartbeats(&pool, &ours, thawed_at, LEASE / 3).await?;
    let after = snapshot(&pool, &ids).await?;
    let changed_after_thaw = before
        .iter()
        .zip(&after)
        .filter(|(was, is)| was != is)
        .count()
        + before.len().abs_diff(after.len());

    // It carries on: alone now, it runs a new batch.
    other.stop(Duration::from_secs(10)).await;
    let last = super::queue_noops(&pool, LAST_BATCH).await?;
    let carried_on = super::wait_until_finished(&pool, &last, Duration::from_secs(60)).await
        && frozen.exited().is_none();
    frozen.stop(Duration::from_secs(10)).await;

    let ledger = Ledger::read(&pool, &ids).await?;
    let (present, completed) = (ledger.present, ledger.completed);
    let panics = process::panics_in(&log);
    pool.close().await;

    let mut outcome = Outcome::default();
    outcome.figure("jobs", total);
    outcome.figure("done_at_freeze", done_at_freeze);
    outcome.figure("jobs_per_s_before", rate_before.round());
    outcome.figure("unfinished_at_limit", unfinished_then);
    outcome.figure(
        "settled_s",
        (settled_in.as_secs_f64() * 10.0).round() / 10.0,
    );
    outcome.figure("completed", completed);
    outcome.figure("lost", total as i64 - present);
    outcome.figure("cancel", cancel_answer.clone());
    outcome.figure(
        "cancel_ms",
        cancel_took.map_or(-1, |took| took.as_millis() as i64),
    );
    outcome.figure("changed_after_thaw", changed_after_thaw);
    outcome.figure("carried_on", carried_on);

    outcome.check(
        settled,
        format!(
            "jobs were still unfinished {} s after the freeze (the lease plus {} s)",
            limit.as_secs(),
            SETTLE_AFTER_LEASE.as_secs()
        ),
    );
    outcome.check(
        present == total as i64,
        format!("{} jobs were lost", total as i64 - present),
    );
    // The cancelled one may end cancelled (or completed, had it finished first).
    outcome.check(
        completed >= total as i64 - 1,
        format!("only {completed} of {total} jobs completed"),
    );
    outcome.check(target.is_some(), "the frozen worker held no job to cancel");
    outcome.check(
        cancel_took.is_none_or(|took| took <= CANCEL_LIMIT),
        format!("the admin's cancel took {cancel_took:?}"),
    );
    outcome.check(
        cancel_answer.starts_with("cancelled")
            || cancel_answer.starts_with("requested")
            || cancel_answer == "409",
        format!("the admin's cancel answered {cancel_answer:?}"),
    );
    outcome.check(
        finished,
        "the drain never finished, so the thaw was not tried",
    );
    outcome.check(
        renewed_twice,
        "the thawed worker did not renew its leases twice within 30 s",
    );
    outcome.check(
        changed_after_thaw == 0,
        format!("the thawed worker changed {changed_after_thaw} finished jobs"),
    );
    outcome.check(carried_on, "the thawed worker did not run the last batch");
    outcome.check(panics == 0, format!("{panics} panics in the workers' log"));
    Ok(outcome)
}

/// Queues the drain: sleeps of 5 ms, one in a hundred of 2 s.
async fn insert_jobs(pool: &PgPool, count: usize) -> anyhow::Result<Vec<i64>> {
    let jobs = JobClient::new(pool.clone(), 1);
    let mut tx = pool.begin().await?;
    let mut ids = Vec::with_capacity(count);
    for n in 0..count {
        let ms = if n % 100 == 50 { 2_000 } else { 5 };
        ids.push(jobs.insert_tx::<Sleep>(&mut tx, &SleepArgs { ms }).await?.0);
    }
    tx.commit().await?;
    Ok(ids)
}

async fn done_among(pool: &PgPool, ids: &[i64]) -> Result<i64, sqlx::Error> {
    Ok(ids.len() as i64 - super::unfinished_among(pool, ids).await?)
}

/// Every job row as a person would compare it: state, attempt, end, output, errors.
async fn snapshot(pool: &PgPool, ids: &[i64]) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT concat_ws('|', id, state, attempt, finalized_at, output::text, errors::text)
         FROM jobs WHERE id = ANY($1) ORDER BY id",
    )
    .bind(ids)
    .fetch_all(pool)
    .await
}

/// Waits until the worker matching `ours` has said it is alive twice since `since`
/// (its lease renewal, every `every`): by then it has woken, found its claims ended and
/// its jobs taken, and stopped what it ran. Answers whether it did within 30 s.
async fn wait_for_heartbeats(
    pool: &PgPool,
    ours: &str,
    since: time::OffsetDateTime,
    every: Duration,
) -> anyhow::Result<bool> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let second = since + every;
    loop {
        let beat: Option<time::OffsetDateTime> =
            sqlx::query_scalar("SELECT max(heartbeat_at) FROM job_workers WHERE worker_id LIKE $1")
                .bind(ours)
                .fetch_one(pool)
                .await?;
        if beat.is_some_and(|beat| beat > second) {
            return Ok(true);
        }
        if Instant::now() > deadline {
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
