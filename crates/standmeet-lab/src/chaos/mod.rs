//! `standmeet-lab chaos`: proves StandMeet's promises while things break, with real
//! processes, a real PostgreSQL and a real SMTP peer on loopback.
//!
//! A private PostgreSQL cluster is made in a scratch directory (as `standmeet-lab bench`
//! does); each scenario gets a fresh, migrated database of its own in it. Workers and
//! servers are real processes (this binary as `chaos-worker`, the server as `serve`), so a
//! `kill -9` kills a real process with real connections. Scenarios (`--only <name>`):
//!
//! - `kill9`: two workers are killed and restarted at random moments while they run
//!   jobs: no job is lost, every job completes, effects happen at least once.
//! - `pg-restart`: PostgreSQL restarts while 64 callers wait for their jobs: every
//!   caller returns within its limit, and no answer is lost to a receipt.
//! - `approvals`: access requests are approved over HTTP and MCP while the mail
//!   server refuses some mails and cuts the line after others: no 5xx, every mail job
//!   ends, every replied request got mail, every mailed code redeems.
//! - `bad-input`: every server function and MCP tool gets garbage: no 5xx, no panic,
//!   nothing written.
//! - `vault-hostile`: a watched vault gets an alias bomb, a note nested 10,000 deep, a
//!   NUL in YAML, a FIFO, a comment after code and a flood of 10,000 notes, then is
//!   emptied as an unmount would: the server stays healthy and small, every ordinary
//!   note is searchable, each bad note is listed once, and nothing is removed.
//! - `vault-watch`: the vault's folder is not there at start, then comes with more
//!   folders than the server may watch (a limit of its own user namespace) and a link
//!   to `/`, shrinks, is unmounted and comes back: one process throughout, `/readyz`
//!   ready at every poll and saying `waiting` or `watching`, nothing behind the link
//!   read, every job ended.
//! - `slow-clients`: 1,000 connections trickle their headers, then 600 requests their
//!   bodies: the probes answer within 100 ms and a visitor's page within 1 s, and the
//!   server closes each trickling connection at its header timeout.
//! - `rolling-restart`: two copies behind nginx (configured from the docs' own file,
//!   `deploy/nginx/standmeet.conf`), each restarted in turn under page views, form
//!   posts, MCP calls and approvals that wait for their mail: 0 failed requests, 0
//!   lost jobs, every wait answered or given a receipt.
//! - `poison`: jobs whose handler aborts its process or overflows its stack: each is
//!   counted as an attempt per death and discarded after three; the other jobs run on,
//!   and the restarts stop.
//! - `freeze`: a worker frozen mid-drain (SIGSTOP) lets go of its jobs within the lease,
//!   an admin's cancel answers within 2 s, and once thawed it overwrites nothing.
//! - `claim-write-lost`: claims lose their connection while their attempts run: every
//!   job ends once, with one effect, and an admin's cancel still reaches what runs on.
//! - `blackhole`: the LISTEN connection goes silent without being closed (through a
//!   relay, [`relay`]): the listener notices within 10 s and reconnects, and meanwhile
//!   no caller waits past its limit for a job that finished.
//! - `receiver-down`: a webhook receiver hangs every connection for ten minutes of the
//!   circuit's time, then comes back: every event reaches it under its one id, and the
//!   endpoint that was up all along is not held up meanwhile.
//! - `failover` (full run only): the primary crashes under load and its synchronous standby is promoted
//!   (PostgreSQL's own tools, behind the relay): every acknowledged job completes,
//!   callers, live streams and listeners carry on, and the old primary is left alone.
//! - `soak` (full run only): jobs, live streams, callers, searches and approvals at
//!   once for five minutes: memory, connections, waiters and latency stay flat
//!   (printed per minute).
//!
//! It prints a table (one row per scenario, its figures, PASS or FAIL) and one JSON
//! line with every figure, and fails (non-zero exit) when a promise broke, never
//! because something was slow. The default size is quick (CI runs it, about 2 min);
//! `--full` is the real one, with `soak` (about 9 min). A failed run keeps its scratch directory, with every
//! child's log, for a post-mortem.

mod approvals;
mod bad_input;
mod blackhole;
mod claim_write_lost;
mod effect;
mod failover;
mod freeze;
mod http;
mod kill9;
mod ledger;
mod pg_restart;
mod poison;
mod process;
mod receiver_down;
pub mod relay;
mod rolling_restart;
mod slow_clients;
mod soak;
mod vault_hostile;
mod vault_watch;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};
use sqlx::PgPool;

use standmeet::config::Settings;
use standmeet::db::{self, PrivateCluster};
use standmeet_jobs::{JobClient, JobRuntime, QueueConfig};

pub use effect::{ChaosEffect, EffectArgs};

pub struct ChaosOptions {
    /// The full size instead of the quick one.
    pub full: bool,
    /// Only this scenario (one of [`SCENARIOS`]).
    pub only: Option<String>,
}

/// Every scenario, in the order a run takes them.
pub const SCENARIOS: [&str; 15] = [
    "kill9",
    "pg-restart",
    "approvals",
    "bad-input",
    "vault-hostile",
    "vault-watch",
    "slow-clients",
    "rolling-restart",
    "poison",
    "freeze",
    "claim-write-lost",
    "blackhole",
    "receiver-down",
    "failover",
    "soak",
];

/// Scenarios a quick run leaves out; `--only` runs them anyway, at the quick size.
/// `soak` takes minutes; `failover` builds a second cluster from a base backup, which
/// the quick run's time budget leaves to the full run.
const FULL_RUN_ONLY: [&str; 2] = ["failover", "soak"];

/// How big each scenario is.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sizes {
    pub kill9_jobs: usize,
    pub kill9_kills: usize,
    pub restart_callers: usize,
    pub access_requests: usize,
    pub poison_ordinary_jobs: usize,
    pub freeze_jobs: usize,
    pub claim_lost_jobs: usize,
    pub soak_minutes: u32,
    /// How long jobs or mails may take to settle before that counts as a failure.
    pub settle_limit: Duration,
}

impl Sizes {
    fn for_run(full: bool) -> Sizes {
        if full {
            Sizes {
                kill9_jobs: 2_000,
                kill9_kills: 100,
                restart_callers: 64,
                access_requests: 1_000,
                poison_ordinary_jobs: 5_000,
                freeze_jobs: 20_000,
                claim_lost_jobs: 3_000,
                soak_minutes: 5,
                settle_limit: Duration::from_secs(240),
            }
        } else {
            Sizes {
                kill9_jobs: 300,
                kill9_kills: 10,
                restart_callers: 64,
                access_requests: 100,
                poison_ordinary_jobs: 1_000,
                freeze_jobs: 20_000,
                claim_lost_jobs: 400,
                soak_minutes: 1,
                settle_limit: Duration::from_secs(120),
            }
        }
    }
}

/// The `application_name` of the harness's own connections to a scenario's database.
pub(crate) const HARNESS_APPLICATION: &str = "standmeet-chaos";

/// What every scenario works with: the cluster, the scratch directory for its logs,
/// and the sizes of this run.
pub(crate) struct Lab {
    pub cluster: Arc<PrivateCluster>,
    pub dir: PathBuf,
    pub sizes: Sizes,
}

impl Lab {
    /// A fresh database for one scenario, migrated, with the table of chaos effects:
    /// its URL (for children) and a pool (for the scenario's own checks).
    ///
    /// The pool's connections are named [`HARNESS_APPLICATION`], apart from a child's
    /// (`standmeet`, `standmeet-jobs`, …), so that a scenario can count what a server
    /// holds.
    pub async fn fresh_database(&self, name: &str) -> anyhow::Result<(String, PgPool)> {
        let url = self.cluster.database_url(name);
        let setup = db::connect(&url).await?;
        db::migrate(&setup).await?;
        effect::create_table(&setup).await?;
        let options = (*setup.connect_options())
            .clone()
            .application_name(HARNESS_APPLICATION);
        setup.close().await;
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(db::APP_POOL_SIZE)
            .connect_with(options)
            .await?;
        Ok((url, pool))
    }

    /// Where a child's output goes.
    pub fn log_path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }
}

/// What one scenario found: its figures, in the order they are printed, and the
/// promises that broke, in words.
#[derive(Default)]
pub(crate) struct Outcome {
    figures: Vec<(&'static str, Value)>,
    broken: Vec<String>,
}

impl Outcome {
    pub fn figure(&mut self, name: &'static str, value: impl Into<Value>) {
        self.figures.push((name, value.into()));
    }

    /// Records `promise` as broken unless it `held`.
    pub fn check(&mut self, held: bool, promise: impl Into<String>) {
        if !held {
            self.broken.push(promise.into());
        }
    }

    /// A scenario that could not run to its end counts as broken.
    fn aborted(error: anyhow::Error) -> Outcome {
        Outcome {
            figures: Vec::new(),
            broken: vec![format!("the scenario could not run to its end: {error:#}")],
        }
    }
}

struct ScenarioResult {
    name: &'static str,
    seconds: f64,
    outcome: Outcome,
}

pub async fn run(options: ChaosOptions) -> anyhow::Result<()> {
    let chosen: Vec<&'static str> = match options.only.as_deref() {
        None => SCENARIOS
            .iter()
            .copied()
            .filter(|name| options.full || !FULL_RUN_ONLY.contains(name))
            .collect(),
        Some(name) => match SCENARIOS.iter().find(|known| **known == name) {
            Some(known) => vec![*known],
            None => bail!(
                "there is no chaos scenario {name:?}; try {}",
                SCENARIOS.join(", ")
            ),
        },
    };
    let mode = if options.full { "full" } else { "quick" };
    let dir = scratch_dir()?;
    let root = dir.join("pg");
    let cluster = tokio::task::spawn_blocking(move || PrivateCluster::start(&root))
        .await
        .context("the cluster's start-up task failed")??;
    let lab = Lab {
        cluster: Arc::new(cluster),
        dir: dir.clone(),
        sizes: Sizes::for_run(options.full),
    };
    eprintln!("chaos: {mode} mode; logs in {}", dir.display());

    let started = Instant::now();
    let mut results = Vec::new();
    for name in chosen {
        eprintln!("chaos: {name} …");
        let began = Instant::now();
        let outcome = match name {
            "kill9" => kill9::run(&lab).await,
            "pg-restart" => pg_restart::run(&lab).await,
            "approvals" => approvals::run(&lab).await,
            "poison" => poison::run(&lab).await,
            "freeze" => freeze::run(&lab).await,
            "claim-write-lost" => claim_write_lost::run(&lab).await,
            "blackhole" => blackhole::run(&lab).await,
            "receiver-down" => receiver_down::run(&lab).await,
            "failover" => failover::run(&lab).await,
            "soak" => soak::run(&lab).await,
            "vault-hostile" => vault_hostile::run(&lab).await,
            "vault-watch" => vault_watch::run(&lab).await,
            "slow-clients" => slow_clients::run(&lab).await,
            "rolling-restart" => rolling_restart::run(&lab).await,
            _ => bad_input::run(&lab).await,
        }
        .unwrap_or_else(Outcome::aborted);
        results.push(ScenarioResult {
            name,
            seconds: began.elapsed().as_secs_f64(),
            outcome,
        });
    }

    // Every child is gone by now (each scenario stops its own); stop the cluster. The
    // report comes first whatever happens to the cluster.
    let stopped = match Arc::try_unwrap(lab.cluster) {
        Ok(cluster) => tokio::task::spawn_blocking(move || cluster.stop()).await,
        // Someone still holds it (a task that outlived its scenario): its Drop stops it.
        Err(shared) => {
            drop(shared);
            Ok(Ok(()))
        }
    };
    report(mode, started.elapsed(), &results);
    match stopped {
        Ok(Ok(())) => {}
        Ok(Err(err)) => eprintln!("chaos: could not stop the cluster: {err:#}"),
        Err(err) => eprintln!("chaos: could not stop the cluster: {err}"),
    }
    let failed: Vec<&str> = results
        .iter()
        .filter(|result| !result.outcome.broken.is_empty())
        .map(|result| result.name)
        .collect();
    if failed.is_empty() {
        let _ = std::fs::remove_dir_all(&dir);
        Ok(())
    } else {
        bail!(
            "{} of {} chaos scenarios broke a promise ({}); the logs are in {}",
            failed.len(),
            results.len(),
            failed.join(", "),
            dir.display()
        )
    }
}

/// The table on stdout, then one JSON line with every figure.
fn report(mode: &str, took: Duration, results: &[ScenarioResult]) {
    let shown = |value: &Value| match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    println!();
    println!(
        "{:<16} {:<6} {:>8}  figures",
        "scenario", "result", "seconds"
    );
    for result in results {
        let verdict = if result.outcome.broken.is_empty() {
            "PASS"
        } else {
            "FAIL"
        };
        let figures: Vec<String> = result
            .outcome
            .figures
            .iter()
            .map(|(name, value)| format!("{name}={}", shown(value)))
            .collect();
        println!(
            "{:<16} {:<6} {:>8.1}  {}",
            result.name,
            verdict,
            result.seconds,
            figures.join(" ")
        );
    }
    for result in results {
        for broken in &result.outcome.broken {
            println!("  {} FAIL: {broken}", result.name);
        }
    }
    let scenarios: Vec<Value> = results
        .iter()
        .map(|result| {
            let figures: serde_json::Map<String, Value> = result
                .outcome
                .figures
                .iter()
                .map(|(name, value)| (name.to_string(), value.clone()))
                .collect();
            json!({
                "name": result.name,
                "pass": result.outcome.broken.is_empty(),
                "seconds": (result.seconds * 10.0).round() / 10.0,
                "figures": figures,
                "broken": result.outcome.broken,
            })
        })
        .collect();
    println!(
        "{}",
        json!({ "chaos": mode, "seconds": took.as_secs(), "scenarios": scenarios })
    );
}

fn scratch_dir() -> anyhow::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("standmeet-chaos-{}", std::process::id()));
    std::fs::create_dir_all(&dir).context("cannot make the chaos run's scratch directory")?;
    // The postgres user (when we are root) must be able to reach the cluster below it.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))?;
    Ok(dir)
}

/// A count that `sql` makes of the jobs `ids` (its `$1`).
pub(crate) async fn count_among(pool: &PgPool, sql: &str, ids: &[i64]) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(sql).bind(ids).fetch_one(pool).await
}

/// Queues `count` no-op jobs in one transaction; answers their ids.
pub(crate) async fn queue_noops(pool: &PgPool, count: usize) -> anyhow::Result<Vec<i64>> {
    let jobs = JobClient::new(pool.clone(), 1);
    let mut tx = pool.begin().await?;
    let mut ids = Vec::with_capacity(count);
    for n in 0..count {
        let id = jobs
            .insert_tx::<standmeet_jobs::builtin::Noop>(&mut tx, &serde_json::json!({ "n": n }))
            .await?;
        ids.push(id.0);
    }
    tx.commit().await?;
    Ok(ids)
}

/// How many of the jobs `ids` are not finished (completed, discarded or cancelled).
pub(crate) async fn unfinished_among(pool: &PgPool, ids: &[i64]) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT count(*) FROM jobs
         WHERE id = ANY($1) AND state NOT IN ('completed', 'discarded', 'cancelled')",
    )
    .bind(ids)
    .fetch_one(pool)
    .await
}

/// Waits until every job of `ids` is finished, up to `limit`; answers whether they
/// all did. A failed read (the database restarting) just means "not yet".
pub(crate) async fn wait_until_finished(pool: &PgPool, ids: &[i64], limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if let Ok(0) = unfinished_among(pool, ids).await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The first few entries of a list of problems, for a message.
pub(crate) fn first_few(list: &[String]) -> String {
    list.iter().take(5).cloned().collect::<Vec<_>>().join("; ")
}

/// The start of `text` on one line, for a message.
pub(crate) fn snippet(text: &str) -> String {
    let line: String = text.chars().take(160).collect();
    line.replace(['\n', '\r'], " ")
}

/// The environment variable that sets how many `default`-queue jobs a chaos worker
/// runs at once (few, so that the jobs of a run last long enough to be killed).
pub(crate) const WORKER_SLOTS_VAR: &str = "STANDMEET_CHAOS_SLOTS";

/// The environment variable that sets how long a chaos worker's claims wait for their
/// attempts (milliseconds; the engine's usual window when unset): longer windows keep
/// claims open long enough for a scenario to cut them.
pub(crate) const CLAIM_WINDOW_VAR: &str = "STANDMEET_CHAOS_CLAIM_WINDOW_MS";

/// `standmeet-lab chaos-worker`: a job worker and nothing else, for the chaos scenarios to
/// kill. Settings come from the environment (`DATABASE_URL` is required); it runs the
/// built-in kinds, `chaos.effect` and the poison kinds (`chaos.abort`,
/// `chaos.overflow`) on the `default` queue until SIGTERM or Ctrl-C, then stops
/// gracefully.
pub async fn worker_main() -> anyhow::Result<()> {
    let settings = Settings::from_env()?;
    let url = settings
        .database_url
        .clone()
        .context("the chaos worker needs DATABASE_URL")?;
    let pool = db::connect(&url).await?;
    let slots = std::env::var(WORKER_SLOTS_VAR)
        .ok()
        .and_then(|raw| raw.parse::<usize>().ok())
        .filter(|slots| *slots > 0)
        .unwrap_or(10);
    let registry = standmeet_jobs::builtin::registry()
        .register(ChaosEffect)
        .register(poison::ChaosAbort)
        .register(poison::ChaosOverflow);
    let mut config = settings.engine_config(&registry);
    // Only the queue chaos jobs use, polled often: a lost wake-up costs little time.
    config.queues = vec![QueueConfig::new(
        "default",
        slots,
        Duration::from_millis(100),
    )];
    config.shutdown_grace = Duration::from_secs(2);
    if let Some(window) = std::env::var(CLAIM_WINDOW_VAR)
        .ok()
        .and_then(|raw| raw.parse::<u64>().ok())
    {
        config.claim_window = Duration::from_millis(window);
    }
    let jobs = JobClient::new(pool.clone(), settings.max_waiters);
    let runtime = JobRuntime::start(&pool, registry, config, &jobs).await?;
    standmeet::startup::shutdown_signal().await;
    runtime.shutdown().await;
    pool.close().await;
    Ok(())
}
