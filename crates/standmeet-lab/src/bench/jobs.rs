//! The job engine and the waiters. Measures:
//! (a) commit → waiter woken, idle: `system.noop` jobs one after another, from the
//!     insert's commit to the waiter getting the finished row;
//! (b) drain: jobs/s to run N queued no-op jobs (the median of some rounds, with their
//!     range);
//! (c) commit → waiter woken while 1,000 jobs/s run in the background.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use super::cpu::{self, Reading, Spent};
use super::{median, ms, percentile};
use serde_json::json;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use standmeet_jobs::builtin::Noop;
use standmeet_jobs::{EngineConfig, JobClient, JobRuntime, QueueConfig, WaitOutcome};

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
        rescue_interval: Duration::from_secs(15),
        clean_interval: Duration::from_secs(3_600),
        shutdown_grace: Duration::from_secs(5),
        ..EngineConfig::default()
    }
}

/// Starts the benchmark's engine for `jobs`, on a pool of its own to `pool`'s database,
/// as `serve` gives it one ([`engine_pool`]).
pub(super) async fn start_jobs(pool: &PgPool, jobs: &JobClient) -> anyhow::Result<JobRuntime> {
    let config = bench_config();
    let runtime = JobRuntime::start(
        &engine_pool(pool),
        standmeet_jobs::builtin::registry(),
        config,
        jobs,
    )
    .await?;
    Ok(runtime)
}

/// The engine's pool to `pool`'s database, made as `serve` makes it, and once per
/// database for the whole run: as in `serve`, its connections outlive the engine's
/// starts, so that a round does not time the opening of connections.
fn engine_pool(pool: &PgPool) -> PgPool {
    static POOLS: std::sync::Mutex<Vec<(String, PgPool)>> = std::sync::Mutex::new(Vec::new());
    let options = pool.connect_options();
    let database = format!(
        "{}:{}/{}",
        options.get_host(),
        options.get_port(),
        options.get_database().unwrap_or_default()
    );
    let mut pools = POOLS.lock().expect("not poisoned");
    if let Some((_, engine)) = pools.iter().find(|(known, _)| *known == database) {
        return engine.clone();
    }
    let needed = bench_config().connections_needed();
    let engine = standmeet::db::engine_pool(pool, needed);
    pools.push((database, engine.clone()));
    engine
}

/// Runs the measures on `pool` (a fresh database) and prints their table.
pub async fn measure(pool: &PgPool, quick: bool, cluster: &cpu::Cluster) -> anyhow::Result<()> {
    let sizes = &Sizes::for_run(quick);
    let pool = pool.clone();
    let jobs = JobClient::new(pool.clone(), 64);

    // (a) Idle latency.
    let running = start_jobs(&pool, &jobs).await?;
    warm_up(&jobs).await?;
    eprintln!("bench: (a) {} sequential no-op jobs", sizes.sequential);
    let mut idle = Vec::with_capacity(sizes.sequential);
    for _ in 0..sizes.sequential {
        idle.push(commit_to_woken(&jobs).await?);
    }
    running.shutdown().await;

    // (b) Drain throughput. One run on a shared machine swings by a fifth either way:
    // the median of the rounds is the figure, printed with their range.
    let mut rounds = Vec::new();
    for round in 1..=sizes.drain_rounds {
        eprintln!(
            "bench: (b) round {round}: draining {} no-op jobs",
            sizes.drain
        );
        rounds.push(drain(&pool, &jobs, sizes.drain, cluster).await?);
    }
    let of_rounds =
        |figure: fn(&Drained) -> f64| median(&mut rounds.iter().map(figure).collect::<Vec<_>>());
    let drain = Drain {
        median: of_rounds(|d| d.rate),
        engine_per_thousand: of_rounds(Drained::process_per_thousand),
        cluster_per_thousand: of_rounds(Drained::cluster_per_thousand),
        rounds: rounds.iter().map(|d| d.rate).collect(),
    };

    // (c) Latency under load.
    eprintln!(
        "bench: (c) {} waits while {} jobs/s run in the background",
        sizes.load_waits, sizes.load_rate_per_sec
    );
    let running = start_jobs(&pool, &jobs).await?;
    let (mut loaded, background_rate) = under_load(&pool, &jobs, sizes).await?;
    running.shutdown().await;
    sqlx::query("TRUNCATE jobs CASCADE").execute(&pool).await?;

    report(sizes, &mut idle, &drain, &mut loaded, background_rate);
    Ok(())
}

/// The drain figures: the medians over the rounds, and each round's speed.
struct Drain {
    median: f64,
    /// Milliseconds of CPU per 1,000 jobs, this process (the engine) and the cluster.
    engine_per_thousand: f64,
    cluster_per_thousand: f64,
    rounds: Vec<f64>,
}

pub(super) async fn warm_up(jobs: &JobClient) -> anyhow::Result<()> {
    for _ in 0..20 {
        commit_to_woken(jobs).await?;
    }
    Ok(())
}

/// Inserts one no-op job and waits for it; answers the time from the insert's commit
/// to the waiter's answer.
pub(super) async fn commit_to_woken(jobs: &JobClient) -> anyhow::Result<Duration> {
    let id = jobs.insert::<Noop>(&json!({})).await?;
    let committed = Instant::now();
    match jobs.wait(&[id], Duration::from_secs(10)).await? {
        WaitOutcome::Done(_) => Ok(committed.elapsed()),
        WaitOutcome::Receipt => bail!("job {id} did not finish within 10 s"),
    }
}

/// What a drain came to: its speed and the CPU it cost.
#[derive(Clone, Copy, Debug)]
pub(super) struct Drained {
    pub jobs: usize,
    /// Jobs per second.
    pub rate: f64,
    /// The CPU spent from the start to the last job recorded.
    pub spent: Spent,
}

impl Drained {
    /// Milliseconds of CPU per 1,000 jobs of this process (where StandMeet's engine
    /// runs; for a peer, of its processes).
    pub(super) fn process_per_thousand(&self) -> f64 {
        Spent::per_thousand(self.spent.this_process + self.spent.peers, self.jobs)
    }

    /// Milliseconds of CPU per 1,000 jobs of the PostgreSQL cluster.
    pub(super) fn cluster_per_thousand(&self) -> f64 {
        Spent::per_thousand(self.spent.cluster, self.jobs)
    }

    /// The mean of some drains of the same size.
    pub(super) fn mean(drains: &[Drained]) -> Drained {
        let n = drains.len() as u32;
        let sum = |part: fn(&Spent) -> Duration| {
            drains.iter().map(|d| part(&d.spent)).sum::<Duration>() / n
        };
        Drained {
            jobs: drains[0].jobs,
            rate: drains.iter().map(|d| d.rate).sum::<f64>() / f64::from(n),
            spent: Spent {
                this_process: sum(|s| s.this_process),
                cluster: sum(|s| s.cluster),
                peers: sum(|s| s.peers),
            },
        }
    }

    /// Both together.
    pub(super) fn total_per_thousand(&self) -> f64 {
        self.process_per_thousand() + self.cluster_per_thousand()
    }
}

/// Queues `count` no-op jobs with no engine running, then starts one and measures how
/// fast it drains them, and the CPU this process and the cluster spend meanwhile.
pub(super) async fn drain(
    pool: &PgPool,
    jobs: &JobClient,
    count: usize,
    cluster: &cpu::Cluster,
) -> anyhow::Result<Drained> {
    queue_noops(pool, count).await?;

    // Counted in this process (the engine runs here), so that measuring does not
    // load the database it measures.
    let before = jobs.recorded();
    let cpu_before = Reading::now(cluster, &[])?;
    let started = Instant::now();
    let running = start_jobs(pool, jobs).await?;
    while jobs.recorded() - before < count as u64 {
        if started.elapsed() > Duration::from_secs(600) {
            bail!(
                "{} jobs still unfinished after 10 minutes",
                count as u64 - (jobs.recorded() - before)
            );
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let took = started.elapsed();
    let spent = cpu_before.spent_until(&Reading::now(cluster, &[])?);
    running.shutdown().await;
    let completed: i64 = sqlx::query_scalar("SELECT count(*) FROM jobs WHERE state = 'completed'")
        .fetch_one(pool)
        .await?;
    if completed as usize != count {
        bail!("only {completed} of {count} jobs completed");
    }
    Ok(Drained {
        jobs: count,
        rate: count as f64 / took.as_secs_f64(),
        spent,
    })
}

/// Queues `count` no-op jobs as for [`drain`], then runs the engine's claim and write
/// on them with nothing else around (`standmeet_jobs::bare`), on as many connections
/// as the engine claims on at once and in batches as large as its, with the terminal
/// notification as the engine sends it; answers its speed and CPU as [`drain`] does.
pub(super) async fn drain_bare(
    pool: &PgPool,
    count: usize,
    cluster: &cpu::Cluster,
) -> anyhow::Result<Drained> {
    queue_noops(pool, count).await?;
    let config = bench_config();
    let queue = &config.queues[0];
    let kinds: Vec<String> = standmeet_jobs::builtin::registry()
        .kinds()
        .map(str::to_string)
        .collect();
    // A process listening for finished jobs, as the engine's drain has one: what the
    // notification costs includes delivering it.
    let listener = JobClient::new(pool.clone(), 64);
    let _listening = listener.listen();
    let waiting = Instant::now();
    while !listener.listener_connected() {
        if waiting.elapsed() > Duration::from_secs(10) {
            bail!("the listener did not connect within 10 s");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let cpu_before = Reading::now(cluster, &[])?;
    let started = Instant::now();
    let recorded = standmeet_jobs::bare::drain_bare(
        &engine_pool(pool),
        &queue.name,
        &kinds,
        queue.workers as i64,
        queue.claims_in_flight,
    )
    .await?;
    let took = started.elapsed();
    let spent = cpu_before.spent_until(&Reading::now(cluster, &[])?);
    if recorded as usize != count {
        bail!("the bare drain recorded {recorded} of {count} jobs");
    }
    Ok(Drained {
        jobs: count,
        rate: count as f64 / took.as_secs_f64(),
        spent,
    })
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
    let jobs = JobClient::new(pool.clone(), 1);
    let mut left = count;
    while left > 0 {
        let batch = left.min(args.len());
        let mut tx = pool.begin().await?;
        jobs.insert_many_tx::<Noop>(&mut tx, &args[..batch]).await?;
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
    jobs: &JobClient,
    sizes: &Sizes,
) -> anyhow::Result<(Vec<Duration>, f64)> {
    let load = SteadyInserts::start(pool, sizes.load_rate_per_sec);
    // Let the load settle before measuring.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut latencies = Vec::with_capacity(sizes.load_waits);
    for _ in 0..sizes.load_waits {
        latencies.push(commit_to_woken(jobs).await?);
    }
    Ok((latencies, load.stop().await?))
}

/// A background task that inserts no-op jobs at a steady rate (a batch every 10 ms)
/// until stopped, for measures taken under load.
pub(super) struct SteadyInserts {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<anyhow::Result<f64>>,
}

impl SteadyInserts {
    pub(super) fn start(pool: &PgPool, per_second: usize) -> SteadyInserts {
        let stop = CancellationToken::new();
        let task = {
            let pool = pool.clone();
            let stop = stop.clone();
            let per_tick = per_second / 100;
            tokio::spawn(async move {
                let args: Vec<serde_json::Value> =
                    (0..per_tick).map(|n| json!({ "n": n })).collect();
                let jobs = JobClient::new(pool.clone(), 1);
                let mut ticks = tokio::time::interval(Duration::from_millis(10));
                let started = Instant::now();
                let mut inserted = 0usize;
                while !stop.is_cancelled() {
                    ticks.tick().await;
                    let mut tx = pool.begin().await?;
                    jobs.insert_many_tx::<Noop>(&mut tx, &args).await?;
                    tx.commit().await?;
                    inserted += per_tick;
                }
                anyhow::Ok(inserted as f64 / started.elapsed().as_secs_f64())
            })
        };
        SteadyInserts { stop, task }
    }

    /// Stops the inserts; answers the rate they actually ran at (jobs/s).
    pub(super) async fn stop(self) -> anyhow::Result<f64> {
        self.stop.cancel();
        self.task.await.context("the background load task failed")?
    }
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
    let drained = drain.median;
    let lowest = drain.rounds.iter().copied().fold(f64::INFINITY, f64::min);
    let highest = drain.rounds.iter().copied().fold(0.0, f64::max);
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
                "(b) drain {} jobs (median of {})",
                sizes.drain, sizes.drain_rounds
            ),
            format!("{drained:.0} jobs/s"),
            "≥ 27000",
            drained >= 27_000.0,
        ),
        (
            "(b) drain, range over the rounds".to_string(),
            format!("{lowest:.0}–{highest:.0}"),
            "",
            true,
        ),
        (
            "(b) drain, CPU per 1,000 jobs: engine process".to_string(),
            format!("{:.1} ms", drain.engine_per_thousand),
            "",
            true,
        ),
        (
            "(b) drain, CPU per 1,000 jobs: PostgreSQL".to_string(),
            format!("{:.1} ms", drain.cluster_per_thousand),
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
        "drain_jobs_per_sec": drained.round(),
        "drain_jobs_per_sec_rounds": drain.rounds.iter().map(|rate| rate.round()).collect::<Vec<_>>(),
        "drain_engine_cpu_ms_per_1000": (drain.engine_per_thousand * 10.0).round() / 10.0,
        "drain_postgres_cpu_ms_per_1000": (drain.cluster_per_thousand * 10.0).round() / 10.0,
        "load_jobs_per_sec": background_rate.round(),
        "load_p50_ms": loaded_p50,
        "load_p99_ms": loaded_p99,
    });
    println!("{line}");
}
