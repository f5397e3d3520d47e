//! The server's memory: `standmeet serve` started as a child process of the benchmark
//! (the `standmeet` binary beside this one, [`crate::server_binary`]) on the benchmark's cluster, its resident size read from
//! `/proc/<pid>/status` once it is up and idle, and its peak (`VmHWM`) after it has
//! drained 100,000 queued no-op jobs (`--quick`: 5,000). Target: idle ≤ 64 MB.

use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::json;
use sqlx::PgPool;
use tokio::process::{Child, Command};

use super::jobs::{queue_noops, until_drained};

pub async fn measure(pool: &PgPool, database_url: &str, quick: bool) -> anyhow::Result<()> {
    let jobs = if quick { 5_000 } else { 100_000 };
    sqlx::query("TRUNCATE jobs CASCADE").execute(pool).await?;

    let port = free_port()?;
    let mut server = Command::new(crate::server_binary()?)
        .arg("serve")
        .env("DATABASE_URL", database_url)
        .env("LEPTOS_SITE_ADDR", format!("127.0.0.1:{port}"))
        .env("STANDMEET_MAIL", "log")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .context("cannot start `standmeet serve` for the memory measure")?;
    let pid = server.id().context("the server exited at once")?;
    let result = async {
        wait_healthy(&mut server, port).await?;
        // Settled: its pools connected, its first maintenance passes done.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let idle = resident_kib(pid, "VmRSS")?;

        eprintln!("bench: memory: the server drains {jobs} no-op jobs");
        queue_noops(pool, jobs).await?;
        until_drained(pool, Duration::from_millis(100)).await?;
        let peak = resident_kib(pid, "VmHWM")?;
        let after = resident_kib(pid, "VmRSS")?;
        anyhow::Ok((idle, peak, after))
    }
    .await;
    let _ = server.start_kill();
    let _ = server.wait().await;
    sqlx::query("TRUNCATE jobs CASCADE").execute(pool).await?;
    let (idle, peak, after) = result?;

    let mb = |kib: u64| kib as f64 / 1024.0;
    println!();
    println!("server memory (resident), `standmeet serve` as a child process");
    println!("{:<44} {:>10} {:>10}", "measure", "MB", "target");
    println!("{:<44} {:>10.1} {:>10}", "idle", mb(idle), "≤ 64");
    println!(
        "{:<44} {:>10.1}",
        format!("peak while draining {jobs} jobs"),
        mb(peak)
    );
    println!("{:<44} {:>10.1}", "after draining", mb(after));
    println!(
        "{}",
        json!({
            "bench": "memory",
            "idle_mb": (mb(idle) * 10.0).round() / 10.0,
            "drain_jobs": jobs,
            "peak_mb": (mb(peak) * 10.0).round() / 10.0,
            "after_mb": (mb(after) * 10.0).round() / 10.0,
        })
    );
    Ok(())
}

/// A port nobody listens on now (the kernel's pick; free again once this returns).
fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

async fn wait_healthy(server: &mut Child, port: u16) -> anyhow::Result<()> {
    let client = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{port}/healthz");
    let started = Instant::now();
    loop {
        if let Some(status) = server.try_wait()? {
            bail!("`standmeet serve` exited before it was up ({status})");
        }
        if let Ok(answer) = client.get(&url).send().await
            && answer.status().is_success()
        {
            return Ok(());
        }
        if started.elapsed() > Duration::from_secs(60) {
            bail!("`standmeet serve` was not healthy within 60 s");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A size line (`VmRSS`, `VmHWM`) of `/proc/<pid>/status`, in KiB.
fn resident_kib(pid: u32, field: &str) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .context("cannot read the server's /proc status")?;
    status
        .lines()
        .find_map(|line| {
            let rest = line.strip_prefix(field)?.strip_prefix(':')?;
            rest.trim().trim_end_matches("kB").trim().parse().ok()
        })
        .with_context(|| format!("no {field} in /proc/{pid}/status"))
}
