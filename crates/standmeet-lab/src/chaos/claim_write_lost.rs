//! claim-write-lost: the connection of a claim breaks while its attempts run, and
//! nothing is lost or done twice on StandMeet's side.
//!
//! One worker (claims kept open 300 ms, so that they can be hit) runs N `chaos.effect`
//! jobs (a side effect committed at once, then 0–400 ms of sleep: some attempts end
//! inside their claim, some outlast it). Every 50–150 ms the claims open at that moment
//! lose their connection (`pg_terminate_backend` on the claim's session, idle in its
//! transaction). Then ten `system.sleep` jobs of a minute are queued, their claims cut
//! likewise, and an admin cancels each once it runs.
//!
//! Promises checked: every job ends `completed`, once: each left exactly one effect (an
//! attempt that ended is recorded by the claim's second write, not run again; one that
//! still ran goes on `running`), and its completion is its last attempt's; no claim's
//! trace is left over; and every cancel reaches its attempt (each sleep ends
//! `cancelled` within 10 s, not after its minute).

use std::time::{Duration, Instant};

use rand::Rng;
use sqlx::PgPool;

use super::ledger::Ledger;
use super::process;
use super::{ChaosEffect, EffectArgs, Lab, Outcome};
use standmeet_jobs::builtin::{Sleep, SleepArgs};
use standmeet_jobs::{JobClient, JobId};

const SLOTS: usize = 16;
/// How long the worker's claims stay open: long enough to be hit at will.
const CLAIM_WINDOW_MS: u64 = 300;
const SLEEPERS: usize = 10;
const CANCEL_LIMIT: Duration = Duration::from_secs(10);

pub(crate) async fn run(lab: &Lab) -> anyhow::Result<Outcome> {
    let total = lab.sizes.claim_lost_jobs;
    let (url, pool) = lab.fresh_database("chaos_claim_lost").await?;
    let ids = insert_effects(&pool, total).await?;
    let log = lab.log_path("claim-write-lost-worker.log");
    let mut worker = process::spawn_worker_with(
        &url,
        SLOTS,
        &log,
        &[
            (super::CLAIM_WINDOW_VAR, CLAIM_WINDOW_MS.to_string()),
            ("STANDMEET_JOB_LEASE_MS", "10000".into()),
        ],
    )?;
    let started = Instant::now();
    let mut cut = 0;
    let deadline = started + lab.sizes.settle_limit;
    while super::unfinished_among(&pool, &ids).await? > 0 && Instant::now() < deadline {
        cut += cut_open_claims(&pool).await?;
        let pause = rand::rng().random_range(50..=150);
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
    let settled = super::wait_until_finished(&pool, &ids, Duration::from_secs(30)).await;

    // Sleepers: their claims are cut too, then an admin cancels each once it runs.
    let jobs = JobClient::new(pool.clone(), 1);
    let mut tx = pool.begin().await?;
    let mut sleepers = Vec::with_capacity(SLEEPERS);
    for _ in 0..SLEEPERS {
        sleepers.push(
            jobs.insert_tx::<Sleep>(&mut tx, &SleepArgs { ms: 60_000 })
                .await?
                .0,
        );
    }
    tx.commit().await?;
    let mut cut_sleepers = 0;
    let running_by = Instant::now() + Duration::from_secs(30);
    while super::count_among(
        &pool,
        "SELECT count(*) FROM jobs WHERE id = ANY($1) AND state = 'running'",
        &sleepers,
    )
    .await?
        < SLEEPERS as i64
        && Instant::now() < running_by
    {
        cut_sleepers += cut_open_claims(&pool).await?;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let client = JobClient::new(pool.clone(), 1);
    let asked = Instant::now();
    for id in &sleepers {
        client.cancel(JobId(*id)).await?;
    }
    let cancelled_in_time = super::wait_until_finished(&pool, &sleepers, CANCEL_LIMIT).await;
    let cancel_took = asked.elapsed();
    worker.stop(Duration::from_secs(10)).await;

    let ledger = Ledger::read(&pool, &ids).await?;
    let (completed, missing, doubled, stale) = (
        ledger.completed,
        ledger.missing_effects,
        ledger.doubled_effects,
        ledger.stale_completions,
    );
    let cancelled = Ledger::read(&pool, &sleepers).await?.cancelled;
    let traces_left: i64 = sqlx::query_scalar("SELECT count(*) FROM job_claims")
        .fetch_one(&pool)
        .await?;
    let panics = process::panics_in(&log);
    pool.close().await;

    let mut outcome = Outcome::default();
    outcome.figure("jobs", total);
    outcome.figure("claims_cut", cut);
    outcome.figure("completed", completed);
    outcome.figure("missing_effects", missing);
    outcome.figure("doubled_effects", doubled);
    outcome.figure("stale_completions", stale);
    outcome.figure("traces_left", traces_left);
    outcome.figure("sleeper_claims_cut", cut_sleepers);
    outcome.figure("cancelled", cancelled);
    outcome.figure(
        "cancel_s",
        (cancel_took.as_secs_f64() * 10.0).round() / 10.0,
    );

    outcome.check(settled, "jobs were still unfinished at the end");
    outcome.check(cut > 0, "no claim was open to cut");
    outcome.check(
        completed == total as i64,
        format!("{completed} of {total} jobs completed"),
    );
    outcome.check(missing == 0, format!("{missing} jobs left no effect"));
    outcome.check(
        doubled == 0,
        format!("{doubled} jobs ran again although their attempt had ended"),
    );
    outcome.check(
        stale == 0,
        format!("{stale} completions are not their job's last attempt's"),
    );
    outcome.check(
        traces_left == 0,
        format!("{traces_left} claim traces were left over"),
    );
    outcome.check(
        cancelled_in_time && cancelled == SLEEPERS as i64,
        format!("{cancelled} of {SLEEPERS} running jobs were cancelled within {CANCEL_LIMIT:?}"),
    );
    outcome.check(panics == 0, format!("{panics} panics in the worker's log"));
    Ok(outcome)
}

/// Ends the session of every claim open now (idle in its transaction after taking its
/// jobs); answers how many.
async fn cut_open_claims(pool: &PgPool) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity
         WHERE datname = current_database() AND state = 'idle in transaction'
           AND query LIKE '%ORDER BY priority, scheduled_at, id%FOR UPDATE SKIP LOCKED%'",
    )
    .fetch_one(pool)
    .await
}

async fn insert_effects(pool: &PgPool, count: usize) -> anyhow::Result<Vec<i64>> {
    let jobs = JobClient::new(pool.clone(), 1);
    let mut tx = pool.begin().await?;
    let mut ids = Vec::with_capacity(count);
    for n in 0..count {
        let sleep_ms = rand::rng().random_range(0..=400);
        let args = EffectArgs {
            n: n as u64,
            sleep_ms,
        };
        ids.push(jobs.insert_tx::<ChaosEffect>(&mut tx, &args).await?.0);
    }
    tx.commit().await?;
    Ok(ids)
}
