//! `standmeet-lab bench`: measures StandMeet on a fresh private PostgreSQL cluster (fsync
//! on, default settings) made in a scratch directory and removed afterwards, and
//! prints a table and one JSON line per subject. `--quick` runs a small version of
//! each measure (CI runs it so the benchmark keeps working; figures from a busy CI
//! machine mean little).
//!
//! - [`jobs`]: the job engine and the waiters: latency, drain throughput, the cost of
//!   the terminal notification, latency under load.
//! - [`panel`]: the Tasks panel with a million jobs: server time of each page and
//!   filter, and of the status poll.
//! - [`corpus`]: the visitors' search over 100,000 entries.
//! - [`events`]: what an event adds to the operation that records it, and webhook
//!   deliveries at 1,000 events/s to one loopback endpoint.
//! - [`memory`]: the server's resident size, idle and while draining 100,000 jobs.
//! - [`scale`]: the drain with 1, 2 and 4 StandMeet processes on one database.
//! - [`vault`]: the corpus from a vault of 10,000 notes: the first rebuild, one that
//!   finds nothing changed, and a written note until search finds it.
//! - [`peer`] (`--peer graphile`, on its own): StandMeet beside graphile-worker.
//! - [`sink`]: with `--traces`, the trace collector the measured process exports to
//!   (a process of its own), and what it received, so that a run says what trace
//!   export costs.

mod corpus;
mod cpu;
mod events;
mod helper;
mod jobs;
mod memory;
mod panel;
mod peer;
mod scale;
pub mod sink;
mod vault;

pub use scale::worker_process;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use sqlx::ConnectOptions;

use standmeet::db::{self, PrivateCluster};

pub struct BenchOptions {
    pub quick: bool,
    /// Only this subject (`jobs`, `scale`, `memory`, `panel`, `corpus`, `events` or
    /// `vault`); all when `None`.
    pub only: Option<String>,
    /// Instead of the subjects, the comparison with this peer (`graphile`).
    pub peer: Option<String>,
    /// How many times the comparison with the peer runs (at least 1); it prints each
    /// run's figures and the median of the runs' medians.
    pub runs: usize,
}

pub async fn run(options: BenchOptions) -> anyhow::Result<()> {
    let subjects: Vec<&str> = match (options.peer.as_deref(), options.only.as_deref()) {
        (Some("graphile"), None) => vec!["peer"],
        (Some(other), None) => {
            anyhow::bail!("there is no peer {other:?} to compare with; try graphile")
        }
        (Some(_), Some(_)) => anyhow::bail!("--peer runs on its own: leave out --only"),
        (None, _) if options.runs != 1 => {
            anyhow::bail!("--runs is for the comparison with a peer: add --peer graphile")
        }
        (None, None) => vec![
            "jobs", "scale", "memory", "panel", "corpus", "events", "vault",
        ],
        (
            None,
            Some(subject @ ("jobs" | "scale" | "memory" | "panel" | "corpus" | "events" | "vault")),
        ) => vec![subject],
        (None, Some(other)) => anyhow::bail!(
            "there is no benchmark {other:?}; try jobs, scale, memory, panel, corpus, events or vault"
        ),
    };
    let dir = scratch_dir()?;
    let root = dir.join("pg");
    let cluster = tokio::task::spawn_blocking(move || PrivateCluster::start(&root)).await??;
    let result = async {
        let pool = db::connect(&cluster.database_url("standmeet_bench")).await?;
        db::migrate(&pool).await?;
        let version: String = sqlx::query_scalar("SHOW server_version")
            .fetch_one(&pool)
            .await?;
        let fsync: String = sqlx::query_scalar("SHOW fsync").fetch_one(&pool).await?;
        eprintln!(
            "bench: PostgreSQL {version}, fsync {fsync}, {} mode",
            if options.quick { "quick" } else { "full" }
        );
        let cpu = cpu::Cluster::new(&cluster)?;
        for subject in subjects {
            match subject {
                "jobs" => jobs::measure(&pool, options.quick, &cpu).await?,
                "panel" => panel::measure(&pool, options.quick).await?,
                "scale" => {
                    let url = cluster.database_url("standmeet_bench");
                    scale::measure(&pool, &url, options.quick).await?
                }
                "memory" => {
                    let url = cluster.database_url("standmeet_bench");
                    memory::measure(&pool, &url, options.quick).await?
                }
                "peer" => peer::compare(&cluster, &pool, &options, &cpu).await?,
                "events" => events::measure(&pool, options.quick).await?,
                "vault" => vault::measure(&pool, options.quick).await?,
                _ => corpus::measure(&pool, options.quick).await?,
            }
        }
        pool.close().await;
        anyhow::Ok(())
    }
    .await;
    tokio::task::spawn_blocking(move || cluster.stop()).await??;
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn scratch_dir() -> anyhow::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("standmeet-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).context("cannot make the benchmark's scratch directory")?;
    // The postgres user (when we are root) must be able to reach the cluster below it.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))?;
    Ok(dir)
}

/// A pool of one connection to the benchmark's database that does not warn about slow
/// statements, for seeding: its statements are slow on purpose, and an operator reading
/// the bench's output should not see a warning (with the whole statement) for each.
async fn quiet_pool(pool: &sqlx::PgPool) -> anyhow::Result<sqlx::PgPool> {
    let quiet = (*pool.connect_options())
        .clone()
        .log_slow_statements(log::LevelFilter::Off, Duration::from_secs(3_600));
    Ok(sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect_with(quiet)
        .await?)
}

/// The middle sample (of an even number, the mean of the two in the middle).
fn median(samples: &mut [f64]) -> f64 {
    samples.sort_by(f64::total_cmp);
    let middle = samples.len() / 2;
    if samples.len().is_multiple_of(2) {
        (samples[middle - 1] + samples[middle]) / 2.0
    } else {
        samples[middle]
    }
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    let index = ((samples.len() as f64 * p).ceil() as usize).clamp(1, samples.len()) - 1;
    samples[index]
}

/// Milliseconds, to the microsecond.
fn ms(duration: Duration) -> f64 {
    (duration.as_secs_f64() * 1_000_000.0).round() / 1_000.0
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn the_median_of_an_even_number_of_samples_is_the_mean_of_the_middle_two() {
        assert_eq!(median(&mut [9.6, 0.0, 11.8, 0.0]), 4.8);
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [5.0]), 5.0);
    }
}
