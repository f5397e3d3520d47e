//! Several StandMeet processes on one database (what a user does who outgrows one
//! machine: N copies in front of one managed PostgreSQL). For 1, 2 and 4 worker
//! processes (this binary's hidden `bench-worker` command: the job engine with the
//! benchmark's setup), the drain throughput of the same queued no-op jobs, first as
//! the processes start (their connections and prepared statements count), then with
//! the same processes warm (what N copies that run all along give), and then
//! commit → waiter woken in the benchmark's own process for jobs that those
//! processes run: a waiter is woken by the shared notification, whichever process
//! finished its job.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::json;
use sqlx::PgPool;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use super::jobs::{commit_to_woken, queue_noops, start_jobs, until_drained};
use super::{helper, ms, percentile};
use standmeet_jobs::JobClient;

const PROCESSES: [usize; 3] = [1, 2, 4];

pub async fn measure(pool: &PgPool, database_url: &str, quick: bool) -> anyhow::Result<()> {
    let (jobs, waits) = if quick { (5_000, 20) } else { (100_000, 200) };
    let queues = JobClient::new(pool.clone(), 64);
    let listening = queues.listen();

    let mut rows = Vec::new();
    for processes in PROCESSES {
        eprintln!("bench: scale: {processes} worker processes drain {jobs} no-op jobs");
        queue_noops(pool, jobs).await?;
        let mut workers = Vec::new();
        for _ in 0..processes {
            let mut command = Command::new(std::env::current_exe()?);
            command
                .arg("bench-worker")
                .env("DATABASE_URL", database_url)
                .env("RUST_LOG", "warn");
            workers.push(
                helper::start(&mut command, "a bench-worker process")
                    .await?
                    .0,
            );
        }
        let started = Instant::now();
        helper::go(&mut workers).await?;
        until_drained(pool, Duration::from_millis(10)).await?;
        let starting = jobs as f64 / started.elapsed().as_secs_f64();

        // The same processes again, now warm (connections open, statements prepared):
        // N copies that run all along, as a user's would. The jobs wait in a paused
        // queue until the clock starts; the resume wakes every process.
        queues.pause_queue("default").await?;
        queue_noops(pool, jobs).await?;
        let started = Instant::now();
        queues.resume_queue("default").await?;
        until_drained(pool, Duration::from_millis(10)).await?;
        let warm = jobs as f64 / started.elapsed().as_secs_f64();

        // Woken here, run there.
        let mut woken = Vec::with_capacity(waits);
        for _ in 0..waits {
            woken.push(commit_to_woken(&queues).await?);
        }
        helper::stop(workers, "a bench-worker process").await?;
        let completed: i64 =
            sqlx::query_scalar("SELECT count(*) FROM jobs WHERE state = 'completed'")
                .fetch_one(pool)
                .await?;
        if completed as usize != jobs + waits {
            bail!("{completed} jobs completed, not {}", jobs + waits);
        }
        rows.push((processes, starting, warm, woken));
    }
    listening.stop().await;
    sqlx::query("TRUNCATE jobs CASCADE").execute(pool).await?;

    println!();
    println!("{jobs} no-op jobs drained by N StandMeet processes on one database");
    println!(
        "{:<10} {:>14} {:>12} {:>22} {:>10}",
        "processes", "starting jobs/s", "warm jobs/s", "woken elsewhere p50 ms", "p99 ms"
    );
    let mut results = Vec::new();
    for (processes, starting, warm, woken) in &mut rows {
        let (p50, p99) = (ms(percentile(woken, 0.50)), ms(percentile(woken, 0.99)));
        println!("{processes:<10} {starting:>14.0} {warm:>12.0} {p50:>22.2} {p99:>10.2}");
        results.push(json!({
            "processes": processes,
            "starting_jobs_per_sec": starting.round(),
            "jobs_per_sec": warm.round(),
            "woken_p50_ms": p50,
            "woken_p99_ms": p99,
        }));
    }
    println!(
        "{}",
        json!({ "bench": "scale", "drain_jobs": jobs, "results": results })
    );
    Ok(())
}

/// The hidden `standmeet-lab bench-worker` command: connects to `DATABASE_URL`, prints
/// "ready", starts the job engine (the benchmark's setup) on a "go" line, and stops it
/// gracefully when its standard input closes.
pub async fn worker_process() -> anyhow::Result<()> {
    let url = std::env::var("DATABASE_URL").context("bench-worker needs DATABASE_URL")?;
    let pool = standmeet::db::connect(&url).await?;
    let jobs = JobClient::new(pool.clone(), 64);
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    println!("ready");
    if lines.next_line().await?.as_deref() != Some("go") {
        return Ok(());
    }
    let running = start_jobs(&pool, &jobs).await?;
    while lines.next_line().await?.is_some() {}
    running.shutdown().await;
    pool.close().await;
    Ok(())
}
