//! `standmeet-lab bench --peer graphile`: StandMeet beside graphile-worker 0.17.3 in one
//! run, on one private cluster, so that the ratio does not depend on how busy the
//! machine was on another day.
//!
//! graphile-worker is installed from npm into a cache directory on first use (see
//! [`peer_dir`]); `graphile_driver.mjs`, written next to it, runs its side. A run first
//! runs 1,000 jobs one after another on each queue for the latency: commit → waiter
//! woken for StandMeet, commit → `job:complete` for graphile-worker (an event in the
//! worker before its batched completion is written: the kinder measure), and, like for
//! like, commit → a notification that graphile-worker's completion was written (a
//! trigger on its jobs table that exists only during this measure). Then both drain
//! the same number of queued no-op jobs (graphile-worker: 2 processes × concurrency 24
//! with its local queue and batched completion, its fastest setting; StandMeet: one
//! process, rows kept, the terminal notification on), alternating, three rounds, after
//! (in the first run) an untimed drain of a tenth as many on each side to warm up. Each
//! round also drains the same jobs with the engine's claim and write alone, nothing
//! else around them (`standmeet_jobs::bare`): the bare limit, what this database can do
//! the engine's way, and how close the engine comes to it (twice, the mean; the terminal
//! notification on, as the engine always sends it).
//!
//! Each drain also counts the CPU it cost (see `cpu`): StandMeet's engine process (this
//! one) or graphile-worker's node processes, and the cluster's processes, as
//! milliseconds per 1,000 jobs. `--runs N` repeats the run N times and prints each
//! run's figures, then the median of the runs' medians with the range over the runs:
//! one run on a shared machine moves with whatever else ran that minute.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::json;
use sqlx::PgPool;
use tokio::process::{Child, Command};

use super::cpu::{self, Reading};
use super::jobs::{Drained, commit_to_woken, drain, drain_bare, start_jobs, warm_up};
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

/// Runs the comparison on `cluster` `options.runs` times; StandMeet's database is
/// `pool`.
pub async fn compare(
    cluster: &PrivateCluster,
    pool: &PgPool,
    options: &super::BenchOptions,
    cpu: &cpu::Cluster,
) -> anyhow::Result<()> {
    let sizes = if options.quick {
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
    let peer = Peer {
        dir: &dir,
        url: &graphile_url,
        pool: &graphile_pool,
        cpu,
    };
    let jobs = JobClient::new(pool.clone(), 64);

    let mut runs = Vec::with_capacity(options.runs);
    for run in 1..=options.runs {
        if options.runs > 1 {
            eprintln!("bench: run {run} of {}", options.runs);
        }
        let figures = one_run(&sizes, pool, &jobs, &peer, run == 1).await?;
        let summary = Summary::of(&figures);
        report_run(&sizes, run, &figures, &summary);
        runs.push(summary);
    }
    graphile_pool.close().await;
    if runs.len() > 1 {
        report_runs(&runs);
    }
    Ok(())
}

/// graphile-worker's side: its install, its database, and where to read the cluster's
/// CPU from.
struct Peer<'a> {
    dir: &'a Path,
    url: &'a str,
    pool: &'a PgPool,
    cpu: &'a cpu::Cluster,
}

/// What one run measured.
struct RunFigures {
    rounds: Vec<Round>,
    our_latency: Vec<Duration>,
    their_complete: Vec<Duration>,
    their_written: Vec<Duration>,
}

/// One round's drains: StandMeet's engine, graphile-worker, and the engine's claim
/// and write alone (the bare limit, the mean of two).
struct Round {
    ours: Drained,
    theirs: Drained,
    bare: Drained,
}

/// One run: the latency one job at a time on each side, then the alternating drains
/// (after an untimed warm-up drain on each side in the first run).
async fn one_run(
    sizes: &Sizes,
    pool: &PgPool,
    jobs: &JobClient,
    peer: &Peer<'_>,
    first: bool,
) -> anyhow::Result<RunFigures> {
    eprintln!("bench: {} jobs one after another on each", sizes.latency);
    sqlx::query("TRUNCATE jobs CASCADE").execute(pool).await?;
    let running = start_jobs(pool, jobs).await?;
    warm_up(jobs).await?;
    let mut our_latency = Vec::with_capacity(sizes.latency);
    for _ in 0..sizes.latency {
        our_latency.push(commit_to_woken(jobs).await?);
    }
    running.shutdown().await;
    sqlx::query("TRUNCATE graphile_worker._private_jobs")
        .execute(peer.pool)
        .await?;
    let output = driver(peer.dir, peer.url, &["latency", &sizes.latency.to_string()]).await?;
    let samples: GraphileLatency = serde_json::from_str(output.trim())
        .with_context(|| format!("the driver's latencies are not the JSON expected: {output}"))?;
    let durations = |samples: Vec<f64>| -> Vec<Duration> {
        samples
            .into_iter()
            .map(|ms| Duration::from_secs_f64(ms / 1_000.0))
            .collect()
    };

    if first {
        // Each side drains a tenth as many first, untimed: a fresh engine's
        // connections prepare their statements on first use, and the first timed
        // round was the slowest of three every time without this.
        eprintln!(
            "bench: warming up: each side drains {} no-op jobs, untimed",
            sizes.drain / 10
        );
        drain(pool, jobs, sizes.drain / 10, peer.cpu).await?;
        sqlx::query("TRUNCATE jobs CASCADE").execute(pool).await?;
        drain_graphile(peer, sizes.drain / 10).await?;
    }

    let mut rounds = Vec::new();
    for round in 1..=sizes.rounds {
        eprintln!(
            "bench: round {round}: StandMeet drains {} no-op jobs",
            sizes.drain
        );
        // Each drain starts with the other queue's table empty, so that no autovacuum
        // of the other's finished jobs runs during it.
        sqlx::query("TRUNCATE graphile_worker._private_jobs")
            .execute(peer.pool)
            .await?;
        let ours = drain(pool, jobs, sizes.drain, peer.cpu).await?;
        // The bare limit, twice, each on an emptied table; the mean.
        let mut bare = Vec::with_capacity(2);
        for _ in 0..2 {
            eprintln!(
                "bench: round {round}: the engine's claim and write alone drain {} no-op jobs",
                sizes.drain,
            );
            sqlx::query("TRUNCATE jobs CASCADE").execute(pool).await?;
            bare.push(drain_bare(pool, sizes.drain, peer.cpu).await?);
        }
        let bare = Drained::mean(&bare);
        sqlx::query("TRUNCATE jobs CASCADE").execute(pool).await?;
        eprintln!(
            "bench: round {round}: graphile-worker drains {} no-op jobs",
            sizes.drain
        );
        let theirs = drain_graphile(peer, sizes.drain).await?;
        eprintln!(
            "bench: round {round}: {:.0} against {:.0} jobs/s ({:.2} ×); the bare limit {:.0} jobs/s ({:.0} % reached); \
             CPU per 1,000 jobs {:.0} against {:.0} ms",
            ours.rate,
            theirs.rate,
            ours.rate / theirs.rate,
            bare.rate,
            ours.rate / bare.rate * 100.0,
            ours.total_per_thousand(),
            theirs.total_per_thousand(),
        );
        rounds.push(Round { ours, theirs, bare });
    }
    Ok(RunFigures {
        rounds,
        our_latency,
        their_complete: durations(samples.complete),
        their_written: durations(samples.written),
    })
}

/// What the driver's `latency` mode prints: milliseconds from each add's commit to its
/// `job:complete` event, and to the notification that its completion was written.
#[derive(serde::Deserialize)]
struct GraphileLatency {
    complete: Vec<f64>,
    written: Vec<f64>,
}

/// One run's figures, each the median over its rounds (CPU in milliseconds per 1,000
/// jobs; latency in milliseconds).
#[derive(Clone, serde::Serialize)]
struct Summary {
    ratio: f64,
    lowest_round_ratio: f64,
    percent_of_bare_limit: f64,
    standmeet_jobs_per_sec: f64,
    graphile_jobs_per_sec: f64,
    bare_limit_jobs_per_sec: f64,
    engine_cpu_ms_per_1000: f64,
    standmeet_postgres_cpu_ms_per_1000: f64,
    standmeet_total_cpu_ms_per_1000: f64,
    bare_process_cpu_ms_per_1000: f64,
    bare_postgres_cpu_ms_per_1000: f64,
    bare_total_cpu_ms_per_1000: f64,
    graphile_node_cpu_ms_per_1000: f64,
    graphile_postgres_cpu_ms_per_1000: f64,
    graphile_total_cpu_ms_per_1000: f64,
    total_cpu_of_graphile: f64,
    standmeet_woken_p50_ms: f64,
    standmeet_woken_p99_ms: f64,
    graphile_done_p50_ms: f64,
    graphile_done_p99_ms: f64,
    graphile_written_p50_ms: f64,
    graphile_written_p99_ms: f64,
    woken_p99_of_graphile_done: f64,
    woken_p99_of_graphile_written: f64,
}

impl Summary {
    fn of(run: &RunFigures) -> Summary {
        let of_rounds = |figure: &dyn Fn(&Round) -> f64| {
            median(&mut run.rounds.iter().map(figure).collect::<Vec<_>>())
        };
        let lowest_round_ratio = run
            .rounds
            .iter()
            .map(|r| r.ours.rate / r.theirs.rate)
            .fold(f64::INFINITY, f64::min);
        let p = |samples: &[Duration], at: f64| ms(percentile(&mut samples.to_vec(), at));
        let (ours_p99, done_p99, written_p99) = (
            p(&run.our_latency, 0.99),
            p(&run.their_complete, 0.99),
            p(&run.their_written, 0.99),
        );
        Summary {
            ratio: of_rounds(&|r| r.ours.rate / r.theirs.rate),
            lowest_round_ratio,
            percent_of_bare_limit: of_rounds(&|r| r.ours.rate / r.bare.rate * 100.0),
            standmeet_jobs_per_sec: of_rounds(&|r| r.ours.rate),
            graphile_jobs_per_sec: of_rounds(&|r| r.theirs.rate),
            bare_limit_jobs_per_sec: of_rounds(&|r| r.bare.rate),
            engine_cpu_ms_per_1000: of_rounds(&|r| r.ours.process_per_thousand()),
            standmeet_postgres_cpu_ms_per_1000: of_rounds(&|r| r.ours.cluster_per_thousand()),
            standmeet_total_cpu_ms_per_1000: of_rounds(&|r| r.ours.total_per_thousand()),
            bare_process_cpu_ms_per_1000: of_rounds(&|r| r.bare.process_per_thousand()),
            bare_postgres_cpu_ms_per_1000: of_rounds(&|r| r.bare.cluster_per_thousand()),
            bare_total_cpu_ms_per_1000: of_rounds(&|r| r.bare.total_per_thousand()),
            graphile_node_cpu_ms_per_1000: of_rounds(&|r| r.theirs.process_per_thousand()),
            graphile_postgres_cpu_ms_per_1000: of_rounds(&|r| r.theirs.cluster_per_thousand()),
            graphile_total_cpu_ms_per_1000: of_rounds(&|r| r.theirs.total_per_thousand()),
            total_cpu_of_graphile: of_rounds(&|r| {
                r.ours.total_per_thousand() / r.theirs.total_per_thousand()
            }),
            standmeet_woken_p50_ms: p(&run.our_latency, 0.50),
            standmeet_woken_p99_ms: ours_p99,
            graphile_done_p50_ms: p(&run.their_complete, 0.50),
            graphile_done_p99_ms: done_p99,
            graphile_written_p50_ms: p(&run.their_written, 0.50),
            graphile_written_p99_ms: written_p99,
            woken_p99_of_graphile_done: ours_p99 / done_p99,
            woken_p99_of_graphile_written: ours_p99 / written_p99,
        }
    }

    /// The figures by name, as the JSON line shows them.
    fn fields(&self) -> serde_json::Map<String, serde_json::Value> {
        match serde_json::to_value(self) {
            Ok(serde_json::Value::Object(fields)) => fields,
            _ => unreachable!("a summary serializes to an object"),
        }
    }

    /// Each field's median over `runs`, as JSON (every field is a number).
    fn medians(runs: &[Summary]) -> serde_json::Map<String, serde_json::Value> {
        let rows: Vec<_> = runs.iter().map(Summary::fields).collect();
        rows[0]
            .keys()
            .map(|key| {
                let mut values: Vec<f64> =
                    rows.iter().filter_map(|row| row[key].as_f64()).collect();
                (key.clone(), json!(rounded(median(&mut values))))
            })
            .collect()
    }
}

/// To the hundredth.
fn rounded(value: f64) -> f64 {
    (value * 100.0).round() / 100.0
}

fn report_run(sizes: &Sizes, run: usize, figures: &RunFigures, summary: &Summary) {
    println!();
    println!(
        "run {run}: StandMeet beside graphile-worker {GRAPHILE_VERSION}: {} queued no-op jobs, {} rounds",
        sizes.drain, sizes.rounds
    );
    println!(
        "{:<6} {:>10} {:>10} {:>7} {:>10} {:>8}   {:>23} {:>23} {:>13}",
        "round",
        "StandMeet",
        "graphile",
        "ratio",
        "bare /s",
        "reached",
        "CPU ms/1,000: engine+PG",
        "graphile node+PG",
        "bare proc+PG"
    );
    for (n, round) in figures.rounds.iter().enumerate() {
        println!(
            "{:<6} {:>10.0} {:>10.0} {:>6.2}× {:>10.0} {:>7.0}%   {:>23} {:>23} {:>13}",
            n + 1,
            round.ours.rate,
            round.theirs.rate,
            round.ours.rate / round.theirs.rate,
            round.bare.rate,
            round.ours.rate / round.bare.rate * 100.0,
            format!(
                "{:.0}+{:.0}",
                round.ours.process_per_thousand(),
                round.ours.cluster_per_thousand()
            ),
            format!(
                "{:.0}+{:.0}",
                round.theirs.process_per_thousand(),
                round.theirs.cluster_per_thousand()
            ),
            format!(
                "{:.0}+{:.0}",
                round.bare.process_per_thousand(),
                round.bare.cluster_per_thousand()
            ),
        );
    }
    let s = summary;
    println!(
        "median ratio {:.2}× (target ≥ 1.5×), lowest round {:.2}×; the engine reached {:.0} % of the bare limit (target ≥ 85 %)",
        s.ratio, s.lowest_round_ratio, s.percent_of_bare_limit
    );
    println!(
        "CPU per 1,000 jobs (median): engine process {:.1} ms, its PostgreSQL {:.1} ms; graphile-worker's node {:.1} ms, its PostgreSQL {:.1} ms; \
         StandMeet's total is {:.2} of graphile-worker's (target ≤ 0.6)",
        s.engine_cpu_ms_per_1000,
        s.standmeet_postgres_cpu_ms_per_1000,
        s.graphile_node_cpu_ms_per_1000,
        s.graphile_postgres_cpu_ms_per_1000,
        s.total_cpu_of_graphile
    );
    println!(
        "the bare limit: {:.1} ms in this process and {:.1} ms in PostgreSQL per 1,000 jobs",
        s.bare_process_cpu_ms_per_1000, s.bare_postgres_cpu_ms_per_1000
    );
    println!(
        "{:<44} {:>9} {:>9}",
        "one job at a time, idle", "p50 ms", "p99 ms"
    );
    for (name, p50, p99) in [
        (
            "StandMeet: commit → waiter woken",
            s.standmeet_woken_p50_ms,
            s.standmeet_woken_p99_ms,
        ),
        (
            "graphile-worker: commit → job:complete",
            s.graphile_done_p50_ms,
            s.graphile_done_p99_ms,
        ),
        (
            "graphile-worker: commit → completion written",
            s.graphile_written_p50_ms,
            s.graphile_written_p99_ms,
        ),
    ] {
        println!("{name:<44} {p50:>9.2} {p99:>9.2}");
    }
    println!(
        "StandMeet's p99 is {:.2} of graphile-worker's completion written (like for like: an outcome that has committed; target ≤ 0.5), \
         {:.2} of its job:complete",
        s.woken_p99_of_graphile_written, s.woken_p99_of_graphile_done
    );
    let mut line = summary.fields();
    for value in line.values_mut() {
        if let Some(number) = value.as_f64() {
            *value = json!(rounded(number));
        }
    }
    line.insert("bench".into(), json!("peer"));
    line.insert(
        "peer".into(),
        json!(format!("graphile-worker {GRAPHILE_VERSION}")),
    );
    line.insert("run".into(), json!(run));
    line.insert("drain_jobs".into(), json!(sizes.drain));
    line.insert(
        "rounds".into(),
        json!(figures
            .rounds
            .iter()
            .map(|round| json!({
                "standmeet_jobs_per_sec": round.ours.rate.round(),
                "graphile_jobs_per_sec": round.theirs.rate.round(),
                "bare_limit_jobs_per_sec": round.bare.rate.round(),
                "ratio": rounded(round.ours.rate / round.theirs.rate),
                "engine_cpu_ms_per_1000": rounded(round.ours.process_per_thousand()),
                "standmeet_postgres_cpu_ms_per_1000": rounded(round.ours.cluster_per_thousand()),
                "graphile_node_cpu_ms_per_1000": rounded(round.theirs.process_per_thousand()),
                "graphile_postgres_cpu_ms_per_1000": rounded(round.theirs.cluster_per_thousand()),
            }))
            .collect::<Vec<_>>()),
    );
    println!("{}", serde_json::Value::Object(line));
}

/// The runs side by side, and the median of their medians.
fn report_runs(runs: &[Summary]) {
    println!();
    println!(
        "{} runs: the median of the runs' medians, and the range over the runs",
        runs.len()
    );
    let medians = Summary::medians(runs);
    let each_run: Vec<_> = runs.iter().map(Summary::fields).collect();
    let range = |key: &str| {
        let values = each_run.iter().filter_map(|fields| fields[key].as_f64());
        let (lowest, highest) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
        format!("{lowest:.2}–{highest:.2}")
    };
    let rows = [
        ("drain ÷ graphile-worker", "ratio", "≥ 1.5, no run < 1.3"),
        ("drain ÷ bare limit, %", "percent_of_bare_limit", "≥ 85"),
        (
            "engine process CPU ms per 1,000 jobs",
            "engine_cpu_ms_per_1000",
            "",
        ),
        (
            "StandMeet PostgreSQL CPU ms per 1,000",
            "standmeet_postgres_cpu_ms_per_1000",
            "",
        ),
        (
            "graphile-worker node CPU ms per 1,000",
            "graphile_node_cpu_ms_per_1000",
            "",
        ),
        (
            "graphile-worker PostgreSQL CPU ms per 1,000",
            "graphile_postgres_cpu_ms_per_1000",
            "",
        ),
        (
            "total CPU ÷ graphile-worker's",
            "total_cpu_of_graphile",
            "≤ 0.6",
        ),
        (
            "woken p99 ÷ graphile written p99",
            "woken_p99_of_graphile_written",
            "≤ 0.5",
        ),
        ("woken p99, ms", "standmeet_woken_p99_ms", ""),
    ];
    println!(
        "{:<44} {:>9} {:>14} {:>20}",
        "measure", "median", "range", "target"
    );
    for (name, key, target) in rows {
        let median = medians[key].as_f64().unwrap_or(f64::NAN);
        println!("{name:<44} {median:>9.2} {:>14} {target:>20}", range(key));
    }
    let mut line = medians;
    line.insert("bench".into(), json!("peer_runs"));
    line.insert("runs".into(), json!(runs.len()));
    line.insert(
        "ratio_of_each_run".into(),
        json!(runs.iter().map(|s| rounded(s.ratio)).collect::<Vec<_>>()),
    );
    println!("{}", serde_json::Value::Object(line));
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
/// starts its processes together and measures how fast they drain them, and the CPU
/// its processes and the cluster spend meanwhile.
async fn drain_graphile(peer: &Peer<'_>, count: usize) -> anyhow::Result<Drained> {
    let (dir, url, pool) = (peer.dir, peer.url, peer.pool);
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
    let pids: Vec<u32> = workers.iter().filter_map(Child::id).collect();

    let cpu_before = Reading::now(peer.cpu, &pids)?;
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
    let mut spent = cpu_before.spent_until(&Reading::now(peer.cpu, &pids)?);
    // This process only watched: graphile-worker's side is its processes and the cluster.
    spent.this_process = Duration::ZERO;
    helper::stop(workers, "a graphile-worker process").await?;
    Ok(Drained {
        jobs: count,
        rate: count as f64 / took.as_secs_f64(),
        spent,
    })
}

fn check_in_time(started: Instant, left: u64) -> anyhow::Result<()> {
    if started.elapsed() > Duration::from_secs(600) {
        bail!("{left} graphile-worker jobs still unfinished after 10 minutes");
    }
    Ok(())
}
