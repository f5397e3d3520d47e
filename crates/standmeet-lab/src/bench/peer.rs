//! `standmeet-lab bench --peer graphile`: StandMeet beside graphile-worker 0.17.3 in one
//! run, on one private cluster, so that the ratio does not depend on how busy the
//! machine was on another day.
//!
//! graphile-worker is installed from npm into a cache directory on first use (see
//! [`peer_dir`]); `graphile_driver.mjs`, written next to it, runs its side. Both queues
//! first run 1,000 jobs one after another for the latency: commit → waiter woken for
//! StandMeet, commit → `job:complete` for graphile-worker (an event in the worker
//! before its batched completion is written: the kinder measure), and, like for like,
//! commit → a notification that graphile-worker's completion was written (a trigger on
//! its jobs table that exists only during this measure). Then both drain the
//! same number of queued no-op jobs (graphile-worker: 2 processes × concurrency 24
//! with its local queue and batched completion, its fastest setting; StandMeet: one
//! process, rows kept, the terminal notification on), alternating, three rounds, after
//! an untimed drain of a tenth as many on each side to warm up. Each
//! round also drains the same jobs with the engine's claim and write alone, nothing
//! else around them (`standmeet_jobs::bare`): the bare limit, what this database can do
//! the engine's way, and how close the engine comes to it (twice, the mean; the terminal
//! notification on, as the engine always sends it).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::json;
use sqlx::PgPool;
use tokio::process::{Child, Command};

use super::jobs::{commit_to_woken, drain, drain_bare, start_jobs, warm_up};
use super::{helper, median, ms, percentile};
use standmeet::db::{self, PrivateCluster};
use standmeet_jobs::JobClient;

const GRAPHILE_VERSION: &str = "0.17.3";
const DRIVER: &str = include_str!("graphile_driver.mjs");
/// graphile-worker processes, each with concurrency 24 (in the driver).
const GRAPHILE_PROCESSES: usize = 2;

struct Sizes {
    drain: usize,
    rounds: usize,
    latency: usize,
}

/// Runs the comparison on `cluster`; StandMeet's database is `pool`.
pub async fn compare(cluster: &PrivateCluster, pool: &PgPool, quick: bool) -> anyhow::Result<()> {
    let sizes = if quick {
        Sizes {
            drain: 5_000,
            rounds: 1,
            latency: 100,
        }
    } else {
        Sizes {
            drain: 100_000,
            rounds: 3,
            latency: 1_000,
        }
    };
    let dir = install_graphile().await?;
    let graphile_url = cluster.database_url("graphile_bench");
    let graphile_pool = db::connect(&graphile_url).await?;
    driver(&dir, &graphile_url, &["migrate"]).await?;

    // Both on fresh tables: the latency first, then the alternating drains.
    let jobs = JobClient::new(pool.clone(), 64);
    eprintln!("bench: {} jobs one after another on each", sizes.latency);
    let running = start_jobs(pool, &jobs).await?;
    warm_up(&jobs).await?;
    let mut our_latency = Vec::with_capacity(sizes.latency);
    for _ in 0..sizes.latency {
        our_latency.push(commit_to_woken(&jobs).await?);
    }
    running.shutdown().await;
    let output = driver(
        &dir,
        &graphile_url,
        &["latency", &sizes.latency.to_string()],
    )
    .await?;
    let samples: GraphileLatency = serde_json::from_str(output.trim())
        .with_context(|| format!("the driver's latencies are not the JSON expected: {output}"))?;
    let durations = |samples: Vec<f64>| -> Vec<Duration> {
        samples
            .into_iter()
            .map(|ms| Duration::from_secs_f64(ms / 1_000.0))
            .collect()
    };
    let mut their_latency = durations(samples.complete);
    let mut their_written = durations(samples.written);

    // Each side drains a tenth as many first, untimed: a fresh engine's connections
    // prepare their statements on first use, and the first timed round was the
    // slowest of three every time without this.
    eprintln!(
        "bench: warming up: each side drains {} no-op jobs, untimed",
        sizes.drain / 10
    );
    drain(pool, &jobs, sizes.drain / 10).await?;
    sqlx::query("TRUNCATE jobs CASCADE").execute(pool).await?;
    drain_graphile(&dir, &graphile_url, &graphile_pool, sizes.drain / 10).await?;

    let mut rounds = Vec::new();
    for round in 1..=sizes.rounds {
        eprintln!(
            "bench: round {round}: StandMeet drains {} no-op jobs",
            sizes.drain
        );
        // Each drain starts with the other queue's table empty, so that no autovacuum
        // of the other's finished jobs runs during it.
        sqlx::query("TRUNCATE graphile_worker._private_jobs")
            .execute(&graphile_pool)
            .await?;
        let ours = drain(pool, &jobs, sizes.drain).await?;
        // The bare limit, twice, each on an emptied table; the mean.
        let mut bare_rates = Vec::with_capacity(2);
        for _ in 0..2 {
            eprintln!(
                "bench: round {round}: the engine's claim and write alone drain {} no-op jobs",
                sizes.drain,
            );
            sqlx::query("TRUNCATE jobs CASCADE").execute(pool).await?;
            bare_rates.push(drain_bare(pool, sizes.drain).await?);
        }
        let bare = bare_rates.iter().sum::<f64>() / bare_rates.len() as f64;
        sqlx::query("TRUNCATE jobs CASCADE").execute(pool).await?;
        eprintln!(
            "bench: round {round}: graphile-worker drains {} no-op jobs",
            sizes.drain
        );
        let theirs = drain_graphile(&dir, &graphile_url, &graphile_pool, sizes.drain).await?;
        eprintln!(
            "bench: round {round}: {ours:.0} against {theirs:.0} jobs/s ({:.2} ×); the bare limit {bare:.0} jobs/s ({:.0} % reached)",
            ours / theirs,
            ours / bare * 100.0
        );
        rounds.push(Round { ours, theirs, bare });
    }

    graphile_pool.close().await;

    report(
        &sizes,
        &rounds,
        &mut our_latency,
        &mut their_latency,
        &mut their_written,
    );
    Ok(())
}

/// What the driver's `latency` mode prints: milliseconds from each add's commit to its
/// `job:complete` event, and to the notification that its completion was written.
#[derive(serde::Deserialize)]
struct GraphileLatency {
    complete: Vec<f64>,
    written: Vec<f64>,
}

/// One round's drains, in jobs/s: StandMeet's engine, graphile-worker, and the engine's
/// claim and write alone (the bare limit).
struct Round {
    ours: f64,
    theirs: f64,
    bare: f64,
}

fn report(
    sizes: &Sizes,
    rounds: &[Round],
    ours: &mut [Duration],
    theirs: &mut [Duration],
    theirs_written: &mut [Duration],
) {
    println!();
    println!(
        "StandMeet beside graphile-worker {GRAPHILE_VERSION}: {} queued no-op jobs, {} rounds",
        sizes.drain, sizes.rounds
    );
    println!(
        "{:<8} {:>18} {:>24} {:>8} {:>16} {:>10}",
        "round", "StandMeet jobs/s", "graphile-worker jobs/s", "ratio", "bare limit /s", "reached"
    );
    for (n, round) in rounds.iter().enumerate() {
        println!(
            "{:<8} {:>18.0} {:>24.0} {:>7.2}× {:>16.0} {:>9.0}%",
            n + 1,
            round.ours,
            round.theirs,
            round.ours / round.theirs,
            round.bare,
            round.ours / round.bare * 100.0
        );
    }
    let mut ratios: Vec<f64> = rounds.iter().map(|r| r.ours / r.theirs).collect();
    let mut reached: Vec<f64> = rounds.iter().map(|r| r.ours / r.bare * 100.0).collect();
    let lowest = ratios.iter().copied().fold(f64::INFINITY, f64::min);
    let (median_ratio, median_reached) = (median(&mut ratios), median(&mut reached));
    println!(
        "median ratio {median_ratio:.2}× (target ≥ 1.5×), lowest of a round {lowest:.2}× (target ≥ 1.35×); \
         the engine reached {median_reached:.0} % of the bare limit (median; aim ≥ 85 %)"
    );
    println!();
    let (our_p50, our_p99) = (ms(percentile(ours, 0.50)), ms(percentile(ours, 0.99)));
    let (their_p50, their_p99) = (ms(percentile(theirs, 0.50)), ms(percentile(theirs, 0.99)));
    println!(
        "{:<44} {:>9} {:>9}",
        "one job at a time, idle", "p50 ms", "p99 ms"
    );
    println!(
        "{:<44} {our_p50:>9.2} {our_p99:>9.2}",
        "StandMeet: commit → waiter woken"
    );
    println!(
        "{:<44} {their_p50:>9.2} {their_p99:>9.2}",
        "graphile-worker: commit → job:complete"
    );
    let (written_p50, written_p99) = (
        ms(percentile(theirs_written, 0.50)),
        ms(percentile(theirs_written, 0.99)),
    );
    println!(
        "{:<44} {written_p50:>9.2} {written_p99:>9.2}",
        "graphile-worker: commit → completion written"
    );
    println!(
        "StandMeet's p99 is {:.2} of graphile-worker's job:complete (target ≤ 0.5), \
         {:.2} of its completion written (like for like: an outcome that has committed)",
        our_p99 / their_p99,
        our_p99 / written_p99
    );
    println!(
        "{}",
        json!({
            "bench": "peer",
            "peer": format!("graphile-worker {GRAPHILE_VERSION}"),
            "drain_jobs": sizes.drain,
            "rounds": rounds.iter().map(|round| json!({
                "standmeet_jobs_per_sec": round.ours.round(),
                "graphile_jobs_per_sec": round.theirs.round(),
                "bare_limit_jobs_per_sec": round.bare.round(),
                "ratio": (round.ours / round.theirs * 100.0).round() / 100.0,
            })).collect::<Vec<_>>(),
            "median_ratio": (median_ratio * 100.0).round() / 100.0,
            "lowest_ratio": (lowest * 100.0).round() / 100.0,
            "median_percent_of_bare_limit": median_reached.round(),
            "standmeet_woken_p50_ms": our_p50,
            "standmeet_woken_p99_ms": our_p99,
            "graphile_done_p50_ms": their_p50,
            "graphile_done_p99_ms": their_p99,
            "woken_p99_of_graphile": (our_p99 / their_p99 * 100.0).round() / 100.0,
            "graphile_written_p50_ms": written_p50,
            "graphile_written_p99_ms": written_p99,
            "woken_p99_of_graphile_written": (our_p99 / written_p99 * 100.0).round() / 100.0,
        })
    );
}

/// Where graphile-worker is installed: `$STANDMEET_PEER_CACHE`, else the user's cache
/// directory (`$XDG_CACHE_HOME/standmeet` or `~/.cache/standmeet`).
fn peer_dir() -> PathBuf {
    let cache = std::env::var_os("STANDMEET_PEER_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("standmeet")))
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/standmeet")))
        .unwrap_or_else(|| std::env::temp_dir().join("standmeet-cache"));
    cache.join(format!("graphile-worker-{GRAPHILE_VERSION}"))
}

/// Installs graphile-worker with npm unless it is there already, and writes the
/// driver beside it (each run, so that it is this binary's driver).
async fn install_graphile() -> anyhow::Result<PathBuf> {
    let dir = peer_dir();
    let installed = dir.join("node_modules/graphile-worker/package.json");
    if !installed.exists() {
        std::fs::create_dir_all(&dir).with_context(|| format!("cannot make {}", dir.display()))?;
        let package = json!({
            "name": "standmeet-bench-peer",
            "private": true,
            "type": "module",
            "dependencies": { "graphile-worker": GRAPHILE_VERSION },
        });
        std::fs::write(dir.join("package.json"), package.to_string())?;
        eprintln!(
            "bench: installing graphile-worker {GRAPHILE_VERSION} into {}",
            dir.display()
        );
        let status = Command::new("npm")
            .args([
                "install",
                "--no-audit",
                "--no-fund",
                "--omit=dev",
                "--loglevel=error",
            ])
            .current_dir(&dir)
            .status()
            .await
            .context("cannot run npm (the comparison needs Node.js and npm)")?;
        if !status.success() {
            bail!("npm could not install graphile-worker {GRAPHILE_VERSION} ({status})");
        }
    }
    let version: serde_json::Value = serde_json::from_slice(&std::fs::read(&installed)?)?;
    if version["version"] != GRAPHILE_VERSION {
        bail!(
            "{} holds graphile-worker {}, not {GRAPHILE_VERSION}: remove it to reinstall",
            dir.display(),
            version["version"]
        );
    }
    std::fs::write(dir.join("graphile_driver.mjs"), DRIVER)?;
    Ok(dir)
}

fn node(dir: &Path, url: &str, args: &[&str]) -> Command {
    let mut command = Command::new("node");
    command
        .arg("graphile_driver.mjs")
        .args(args)
        .current_dir(dir)
        .env("DATABASE_URL", url);
    command
}

/// Runs the driver to its end; answers what it printed.
async fn driver(dir: &Path, url: &str, args: &[&str]) -> anyhow::Result<String> {
    let output = node(dir, url, args)
        .stdin(Stdio::null())
        .output()
        .await
        .context("cannot run node (the comparison needs Node.js)")?;
    if !output.status.success() {
        bail!(
            "the graphile-worker driver ({}) failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Queues `count` jobs for graphile-worker with none of its workers running, then
/// starts its processes together and measures how fast they drain them.
async fn drain_graphile(dir: &Path, url: &str, pool: &PgPool, count: usize) -> anyhow::Result<f64> {
    sqlx::query("TRUNCATE graphile_worker._private_jobs")
        .execute(pool)
        .await?;
    driver(dir, url, &["add", &count.to_string()]).await?;
    // As on the StandMeet side: fresh statistics for the queued jobs, and a checkpoint.
    sqlx::query("VACUUM ANALYZE graphile_worker._private_jobs")
        .execute(pool)
        .await?;
    super::jobs::checkpoint(pool).await?;

    // Each process prints "ready" once Node and graphile-worker are loaded, so that
    // their start-up is not counted; then the count of finished jobs every 1,000.
    let mut workers: Vec<Child> = Vec::new();
    let finished: Arc<Vec<AtomicU64>> =
        Arc::new((0..GRAPHILE_PROCESSES).map(|_| AtomicU64::new(0)).collect());
    for n in 0..GRAPHILE_PROCESSES {
        let (child, mut lines) =
            helper::start(&mut node(dir, url, &["work"]), "a graphile-worker process").await?;
        let finished = finished.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Ok(done) = line.trim().parse::<u64>() {
                    finished[n].store(done, Ordering::Relaxed);
                }
            }
        });
        workers.push(child);
    }

    let started = Instant::now();
    helper::go(&mut workers).await?;
    let total = || {
        finished
            .iter()
            .map(|n| n.load(Ordering::Relaxed))
            .sum::<u64>()
    };
    // The processes report every 1,000; the last few hundred are seen in the table.
    while total() + 1_000 * GRAPHILE_PROCESSES as u64 <= count as u64 {
        check_in_time(started, count as u64 - total())?;
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    loop {
        let left: i64 = sqlx::query_scalar("SELECT count(*) FROM graphile_worker._private_jobs")
            .fetch_one(pool)
            .await?;
        if left == 0 {
            break;
        }
        check_in_time(started, left as u64)?;
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let took = started.elapsed();
    helper::stop(workers, "a graphile-worker process").await?;
    Ok(count as f64 / took.as_secs_f64())
}

fn check_in_time(started: Instant, left: u64) -> anyhow::Result<()> {
    if started.elapsed() > Duration::from_secs(600) {
        bail!("{left} graphile-worker jobs still unfinished after 10 minutes");
    }
    Ok(())
}
