//! The job engine and the waiters. Measures:
//! (a) commit → waiter woken, idle: `system.noop` jobs one after another, from the
//!     insert's commit to the waiter getting the finished row;
//! (b) drain: jobs/s to run N queued no-op jobs, with the terminal notification on and
//!     off (the trigger disabled) in each round, to show what the notification costs;
//! (c) commit → waiter woken while 1,000 jobs/s run in the background.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use super::{median, ms, percentile};
use serde_json::json;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::jobs::builtin::Noop;
use crate::jobs::{
    EngineConfig, JobRuntime, QueueConfig, Signals, WaitOutcome, insert, insert_many_tx,
};

struct Sizes {
    sequential: usize,
    drain: usize,
    drain_rounds: usize,
    load_waits: usize,
    load_rate_per_sec: usize,
}

impl Sizes {
    fn for_run(quick: bool) -> Sizes {
        if quick {
            Sizes {
                sequential: 100,
                drain: 5_000,
                drain_rounds: 1,
                load_waits: 50,
                load_rate_per_sec: 1_000,
            }
        } else {
            Sizes {
                sequential: 1_000,
                drain: 100_000,
                drain_rounds: 4,
                load_waits: 500,
                load_rate_per_sec: 1_000,
            }
        }
    }
}

/// The engine setup of the benchmark: one queue with many workers, so that a fetch
/// takes up to a thousand jobs at once (a local queue) and completions batch up.
fn bench_config() -> EngineConfig {
    EngineConfig {
        queues: vec![
            QueueConfig::new("default", 1_000, Duration::from_secs(1)).with_claims_in_flight(4),
        ],
        retry_base: Duration::from_secs(1),
        lease: Duration::from_secs(30),
        schedule_interval: Duration::from_millis(250),
        rescue_interval: Duration::from_secs(15),
        clean_interval: Duration::from_secs(3_600),
        keep_completed: Duration::from_secs(24 * 3_600),
        keep_discarded: Duration::from_secs(7 * 24 * 3_600),
        shutdown_grace: Duration::from_secs(5),
        worker_id: crate::jobs::worker_id(),
        also_clean: Vec::new(),
        listen_database_url: None,
        claim_window: crate::jobs::CLAIM_WINDOW,
        final_notification: true,
    }
}

pub(super) async fn start_jobs(
    pool: &PgPool,
    signals: &Arc<Signals>,
) -> anyhow::Result<JobRuntime> {
    start_engine(pool, signals, Notification::On).await
}

/// Whether finished jobs are told of (`standmeet_job_final`), by the claims and by the
/// trigger; off only to measure what that costs.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Notification {
    On,
    Off,
}

impl Notification {
    fn word(self) -> &'static str {
        match self {
            Notification::On => "on",
            Notification::Off => "off",
        }
    }
}

async fn start_engine(
    pool: &PgPool,
    signals: &Arc<Signals>,
    notification: Notification,
) -> anyhow::Result<JobRuntime> {
    JobRuntime::start(
        pool,
        crate::jobs::builtin::registry(),
        EngineConfig {
            final_notification: notification == Notification::On,
            ..bench_config()
        },
        signals.clone(),
    )
    .await
}

/// Runs the measures on `pool` (a fresh database) and prints their table.
pub async fn measure(pool: &PgPool, quick: bool) -> anyhow::Result<()> {
    let sizes = &Sizes::for_run(quick);
    let pool = pool.clone();
    let signals = Signals::new(64);

    // (a) Idle latency.
    let running = start_jobs(&pool, &signals).await?;
    warm_up(&pool, &signals).await?;
    eprintln!("bench: (a) {} sequential no-op jobs", sizes.sequential);
    let mut idle = Vec::with_capacity(sizes.sequential);
    for _ in 0..sizes.sequential {
        idle.push(commit_to_woken(&pool, &signals).await?);
    }
    running.shutdown().await;

    // (b) Drain throughput, notification on and off. One run on a shared machine swings
    // by a fifth either way, so the two are paired: each round drains with and without,
    // the order alternating (a round's second drain meets the first's dead rows and
    // vacuum), and the cost is the median of the rounds' costs, printed with its range.
    let mut on = Vec::new();
    let mut off = Vec::new();
    let mut costs = Vec::new();
    for round in 1..=sizes.drain_rounds {
        let order = if round % 2 == 1 {
            [Notification::On, Notification::Off]
        } else {
            [Notification::Off, Notification::On]
        };
        let (mut with, mut without) = (0.0, 0.0);
        for notification in order {
            eprintln!(
                "bench: (b) round {round}: draining {} no-op jobs, notification {}",
                sizes.drain,
                notification.word()
            );
            let rate = drain_noting(&pool, &signals, sizes.drain, notification).await?;
            if notification == Notification::On {
                with = rate;
            } else {
                without = rate;
            }
        }
        on.push(with);
        off.push(without);
        costs.push(notification_cost(with, without));
    }
    let drain = Drain {
        on: median(&mut on),
        off: median(&mut off),
        cost: median(&mut costs.clone()),
        costs,
    };

    // (c) Latency under load.
    eprintln!(
        "bench: (c) {} waits while {} jobs/s run in the background",
        sizes.load_waits, sizes.load_rate_per_sec
    );
    let running = start_jobs(&pool, &signals).await?;
    let (mut loaded, background_rate) = under_load(&pool, &signals, sizes).await?;
    running.shutdown().await;
    sqlx::query("TRUNCATE jobs CASCADE").execute(&pool).await?;

    report(sizes, &mut idle, &drain, &mut loaded, background_rate);
    Ok(())
}

/// The drain figures: medians over the rounds, and the notification's cost in each.
struct Drain {
    on: f64,
    off: f64,
    /// The median of `costs`.
    cost: f64,
    /// Per round, in percent: what the notification took off that round's drain.
    costs: Vec<f64>,
}

/// What the notification costs, in percent of the drain without it (0 when the drain
/// with it was the faster, as noise can make it).
fn notification_cost(on: f64, off: f64) -> f64 {
    ((off - on) / off * 100.0).max(0.0)
}

/// [`drain`], with the notification's trigger disabled for an `Off` drain (and enabled
/// again after it, whatever happened).
async fn drain_noting(
    pool: &PgPool,
    signals: &Arc<Signals>,
    jobs: usize,
    notification: Notification,
) -> anyhow::Result<f64> {
    if notification == Notification::On {
        return drain(pool, signals, jobs, notification).await;
    }
    sqlx::query("ALTER TABLE jobs DISABLE TRIGGER jobs_notify_final_on_update")
        .execute(pool)
        .await?;
    let result = drain(pool, signals, jobs, notification).await;
    sqlx::query("ALTER TABLE jobs ENABLE TRIGGER jobs_notify_final_on_update")
        .execute(pool)
        .await?;
    result
}

pub(super) async fn warm_up(pool: &PgPool, signals: &Arc<Signals>) -> anyhow::Result<()> {
    for _ in 0..20 {
        commit_to_woken(pool, signals).await?;
    }
    Ok(())
}

/// Inserts one no-op job and waits for it; answers the time from the insert's commit
/// to the waiter's answer.
pub(super) async fn commit_to_woken(
    pool: &PgPool,
    signals: &Arc<Signals>,
) -> anyhow::Result<Duration> {
    let id = insert::<Noop>(pool, &json!({})).await?;
    let committed = Instant::now();
    match signals
        .waiters
        .wait(pool, &[id], Duration::from_secs(10))
        .await?
    {
        WaitOutcome::Done(_) => Ok(committed.elapsed()),
        WaitOutcome::Receipt => bail!("job {id} did not finish within 10 s"),
    }
}

/// Queues `count` no-op jobs with no engine running, then starts one and measures how
/// fast it drains them. With the notification `Off`, the caller has disabled the
/// trigger; the engine's claims are told here.
pub(super) async fn drain(
    pool: &PgPool,
    signals: &Arc<Signals>,
    count: usize,
    notification: Notification,
) -> anyhow::Result<f64> {
    queue_noops(pool, count).await?;

    // Counted in this process (the engine runs here), so that measuring does not
    // load the database it measures.
    let before = signals.recorded();
    let started = Instant::now();
    let running = start_engine(pool, signals, notification).await?;
    while signals.recorded() - before < count as u64 {
        if started.elapsed() > Duration::from_secs(600) {
            bail!(
                "{} jobs still unfinished after 10 minutes",
                count as u64 - (signals.recorded() - before)
            );
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let took = started.elapsed();
    running.shutdown().await;
    let completed: i64 = sqlx::query_scalar("SELECT count(*) FROM jobs WHERE state = 'completed'")
        .fetch_one(pool)
        .await?;
    if completed as usize != count {
        bail!("only {completed} of {count} jobs completed");
    }
    Ok(count as f64 / took.as_secs_f64())
}

/// Waits until no job is left to run (another process drains them), looking every
/// `poll`; gives up after 10 minutes.
pub(super) async fn until_drained(pool: &PgPool, poll: Duration) -> anyhow::Result<()> {
    let started = Instant::now();
    loop {
        let unfinished: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM jobs WHERE state IN ('available', 'running', 'scheduled', 'retryable')",
        )
        .fetch_one(pool)
        .await?;
        if unfinished == 0 {
            return Ok(());
        }
        if started.elapsed() > Duration::from_secs(600) {
            bail!("{unfinished} jobs still unfinished after 10 minutes");
        }
        tokio::time::sleep(poll).await;
    }
}

/// Empties the jobs table and queues `count` no-op jobs (in batches of 10,000), with
/// fresh statistics and a checkpoint just taken, for a drain to start from.
pub(super) async fn queue_noops(pool: &PgPool, count: usize) -> anyhow::Result<()> {
    sqlx::query("TRUNCATE jobs CASCADE").execute(pool).await?;
    let args: Vec<serde_json::Value> = (0..10_000).map(|n| json!({ "n": n })).collect();
    let mut left = count;
    while left > 0 {
        let batch = left.min(args.len());
        let mut tx = pool.begin().await?;
        insert_many_tx::<Noop>(&mut tx, &args[..batch]).await?;
        tx.commit().await?;
        left -= batch;
    }
    sqlx::query("VACUUM ANALYZE jobs").execute(pool).await?;
    checkpoint(pool).await
}

/// Takes a checkpoint, so that every timed drain starts at the same point of the
/// checkpoint cycle: PostgreSQL starts one by itself after about half a gigabyte of WAL
/// (the default `max_wal_size`), a few drains of 100,000 jobs in, and the drain it
/// falls in pays for its writes and for a full page image in the WAL at each first
/// change of a page after it. Without this, whichever drain came fourth or so in a
/// run was the slow one (in `--only scale`, the one with four processes).
pub(super) async fn checkpoint(pool: &PgPool) -> anyhow::Result<()> {
    sqlx::query("CHECKPOINT").execute(pool).await?;
    Ok(())
}

/// Measures waits while a background task inserts jobs at the target rate; answers
/// the latencies and the rate the background actually ran at.
async fn under_load(
    pool: &PgPool,
    signals: &Arc<Signals>,
    sizes: &Sizes,
) -> anyhow::Result<(Vec<Duration>, f64)> {
    let stop = CancellationToken::new();
    let background = {
        let pool = pool.clone();
        let stop = stop.clone();
        let per_tick = sizes.load_rate_per_sec / 100;
        tokio::spawn(async move {
            let args: Vec<serde_json::Value> = (0..per_tick).map(|n| json!({ "n": n })).collect();
            let mut ticks = tokio::time::interval(Duration::from_millis(10));
            let started = Instant::now();
            let mut inserted = 0usize;
            while !stop.is_cancelled() {
                ticks.tick().await;
                let mut tx = pool.begin().await?;
                insert_many_tx::<Noop>(&mut tx, &args).await?;
                tx.commit().await?;
                inserted += per_tick;
            }
            anyhow::Ok(inserted as f64 / started.elapsed().as_secs_f64())
        })
    };
    // Let the load settle before measuring.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut latencies = Vec::with_capacity(sizes.load_waits);
    for _ in 0..sizes.load_waits {
        latencies.push(commit_to_woken(pool, signals).await?);
    }
    stop.cancel();
    let rate = background
        .await
        .context("the background load task failed")??;
    Ok((latencies, rate))
}

fn report(
    sizes: &Sizes,
    idle: &mut [Duration],
    drain: &Drain,
    loaded: &mut [Duration],
    background_rate: f64,
) {
    let idle_p50 = ms(percentile(idle, 0.50));
    let idle_p99 = ms(percentile(idle, 0.99));
    let loaded_p50 = ms(percentile(loaded, 0.50));
    let loaded_p99 = ms(percentile(loaded, 0.99));
    let (drain_on, drain_off, cost) = (drain.on, drain.off, drain.cost);
    let rounds = drain
        .costs
        .iter()
        .map(|cost| format!("{cost:.1}"))
        .collect::<Vec<_>>()
        .join(" / ");
    let verdict = |ok: bool| if ok { "met" } else { "MISSED" };

    println!();
    println!(
        "{:<52} {:>14} {:>12} {:>7}",
        "measure", "value", "target", ""
    );
    let rows = [
        (
            format!("(a) commit → woken, idle, p50 ({} jobs)", sizes.sequential),
            format!("{idle_p50:.2} ms"),
            "≤ 3 ms",
            idle_p50 <= 3.0,
        ),
        (
            "(a) commit → woken, idle, p99".to_string(),
            format!("{idle_p99:.2} ms"),
            "≤ 7 ms",
            idle_p99 <= 7.0,
        ),
        (
            format!(
                "(b) drain {} jobs, notification on (median of {})",
                sizes.drain, sizes.drain_rounds
            ),
            format!("{drain_on:.0} jobs/s"),
            "≥ 27000",
            drain_on >= 27_000.0,
        ),
        (
            format!("(b) drain {} jobs, notification off", sizes.drain),
            format!("{drain_off:.0} jobs/s"),
            "",
            true,
        ),
        (
            "(b) cost of the notification (median of the rounds)".to_string(),
            format!("{cost:.1} %"),
            "≤ 5 %",
            cost <= 5.0,
        ),
        (
            "(b) cost of the notification in each round".to_string(),
            format!("{rounds} %"),
            "",
            true,
        ),
        (
            format!("(c) commit → woken at {background_rate:.0} jobs/s, p50"),
            format!("{loaded_p50:.2} ms"),
            "",
            true,
        ),
        (
            format!("(c) commit → woken at {background_rate:.0} jobs/s, p99"),
            format!("{loaded_p99:.2} ms"),
            "≤ 10 ms",
            loaded_p99 <= 10.0,
        ),
    ];
    for (measure, value, target, ok) in rows {
        let mark = if target.is_empty() { "" } else { verdict(ok) };
        println!("{measure:<52} {value:>14} {target:>12} {mark:>7}");
    }
    let line = json!({
        "bench": "jobs",
        "sequential_jobs": sizes.sequential,
        "idle_p50_ms": idle_p50,
        "idle_p99_ms": idle_p99,
        "drain_jobs": sizes.drain,
        "drain_rounds": sizes.drain_rounds,
        "drain_jobs_per_sec_notify_on": drain_on.round(),
        "drain_jobs_per_sec_notify_off": drain_off.round(),
        "notify_cost_percent": (cost * 10.0).round() / 10.0,
        "notify_cost_percent_rounds": drain.costs.iter().map(|cost| (cost * 10.0).round() / 10.0).collect::<Vec<_>>(),
        "load_jobs_per_sec": background_rate.round(),
        "load_p50_ms": loaded_p50,
        "load_p99_ms": loaded_p99,
    });
    println!("{line}");
}
