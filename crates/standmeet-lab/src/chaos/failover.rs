//! failover: the primary dies and its synchronous standby takes over, under load.
//!
//! The topology comes from PostgreSQL's own tools: a primary (initdb), a standby made
//! with `pg_basebackup -R`, and `synchronous_standby_names = '*'` on the primary, so a
//! commit is acknowledged only once the standby has it. StandMeet reaches the database
//! through a TCP relay ([`Relay`]), the way a managed service's address leads to
//! whichever server is primary now.
//!
//! Two `standmeet serve` copies run the jobs. This process inserts `system.sleep` jobs
//! of no length at 500 a second, runs 64 callers that each insert a job (0–1 s) and wait
//! for it with a 5 s limit (as in `pg-restart`), and keeps 20 live streams open, ten on
//! each copy, each following a job that ends after the failover. Then the primary is
//! stopped with `-m immediate` (a crash), the standby promoted (`pg_ctl promote`) and
//! the relay pointed at it. The old primary is started again afterwards, on its own, as
//! a rebooted machine would be.
//!
//! Promises: every job whose insert was acknowledged is on the new primary and ends
//! `completed` (at least once: an attempt cut off by the crash runs again); every
//! caller returns within its limit + the failover's time + 1 s, and none gets a receipt
//! for a job that had finished; every live stream stays open and carries its job's
//! completion; each process's listener is back within 1 s of the new primary
//! answering; nothing is written to the old primary once it is down. The timeline is
//! printed (milliseconds from the crash).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::Value;
use sqlx::{Connection, PgConnection, PgPool};
use time::OffsetDateTime;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::http::ServerClient;
use super::pg_restart::{self, LATENESS_ALLOWED, Tally, WAIT_LIMIT};
use super::process;
use super::relay::Relay;
use super::{Lab, Outcome};
use standmeet::db::{self, PrivateCluster};
use standmeet_jobs::builtin::{Sleep, SleepArgs};
use standmeet_jobs::{InsertOptions, JobClient};
use standmeet_smtp_peer::SmtpPeer;

const DATABASE: &str = "chaos_failover";
/// The background load: this many jobs every [`LOAD_TICK`] (500 a second).
const LOAD_BATCH: usize = 10;
const LOAD_TICK: Duration = Duration::from_millis(20);
/// The load runs this long before the crash, and this long after the new primary
/// answers.
const LOAD_BEFORE: Duration = Duration::from_secs(3);
const LOAD_AFTER: Duration = Duration::from_secs(5);
const LIVE_STREAMS: usize = 20;
/// The followed jobs are due this long after the crash and sleep this long: they end
/// after the failover (and take no slot before it).
const FOLLOWED_DUE_AFTER_CRASH_MS: u64 = 1_000;
const FOLLOWED_SLEEP_MS: u64 = 1_000;
/// The callers' jobs sleep up to this long: with the background load, two copies'
/// `default` slots (ten each) run them all within the callers' limit.
const LONGEST_CALLER_SLEEP_MS: u64 = 1_000;
/// How soon after the new primary answers each listener must be connected again.
const LISTENER_BACK_WITHIN: Duration = Duration::from_secs(1);
const CALLERS_BEFORE_CRASH: Duration = Duration::from_millis(500);

pub(crate) async fn run(lab: &Lab) -> anyhow::Result<Outcome> {
    // The two clusters: a primary and its synchronous standby.
    let primary_root = lab.dir.join("failover-primary");
    let standby_root = lab.dir.join("failover-standby");
    let (mut primary, standby) = tokio::task::spawn_blocking(move || {
        let primary = PrivateCluster::start(&primary_root)?;
        let standby = primary.start_standby(&standby_root)?;
        anyhow::Ok((primary, standby))
    })
    .await??;
    let admin = db::connect(&primary.database_url("postgres")).await?;
    sqlx::query(&format!("CREATE DATABASE {DATABASE}"))
        .execute(&admin)
        .await?;
    // Set after the base backup, so that the standby (promoted, alone) does not wait
    // for a standby of its own.
    sqlx::query("ALTER SYSTEM SET synchronous_standby_names = '*'")
        .execute(&admin)
        .await?;
    sqlx::query("SELECT pg_reload_conf()")
        .execute(&admin)
        .await?;
    wait_for_synchronous_standby(&admin).await?;
    admin.close().await;

    let relay = Relay::start(loopback(primary.port())).await?;
    let url = with_port(&primary.database_url(DATABASE), relay.address().port())?;
    let pool = db::connect(&url).await?;
    db::migrate(&pool).await?;

    let sink = SmtpPeer::start().await?;
    let first =
        process::start_server(&url, sink.port, &lab.log_path("failover-copy-0.log")).await?;
    let second = process::start_another_copy(
        &first,
        &url,
        sink.port,
        &lab.log_path("failover-copy-1.log"),
    )
    .await?;
    let servers = vec![first, second];
    let mut clients = Vec::new();
    for server in &servers {
        clients.push(ServerClient::sign_in(server).await?);
    }
    let callers = lab.sizes.restart_callers;
    let jobs = JobClient::new(pool.clone(), callers);
    let listening = jobs.listen();
    pg_restart::wait_for_listeners(&pool, 3).await?;

    // Twenty live streams, ten on each copy, each following a job that ends after the
    // crash.
    let mut followed = Vec::with_capacity(LIVE_STREAMS);
    let due = OffsetDateTime::now_utc()
        + LOAD_BEFORE
        + CALLERS_BEFORE_CRASH
        + Duration::from_millis(FOLLOWED_DUE_AFTER_CRASH_MS);
    for _ in 0..LIVE_STREAMS {
        let args = SleepArgs {
            ms: FOLLOWED_SLEEP_MS,
        };
        let options = InsertOptions {
            scheduled_at: Some(due),
            ..InsertOptions::default()
        };
        followed.push(jobs.insert_with::<Sleep>(&args, options).await?.0);
    }
    let mut streams = JoinSet::new();
    for (n, job) in followed.iter().enumerate() {
        let response = clients[n % 2].live(&[*job]).await?;
        streams.spawn(follow(response, *job));
    }

    let load = Load::start(pool.clone());
    tokio::time::sleep(LOAD_BEFORE).await;
    let mut calls = JoinSet::new();
    for n in 0..callers {
        let sleep_ms = LONGEST_CALLER_SLEEP_MS * n as u64 / (callers.max(2) - 1) as u64;
        calls.spawn(pg_restart::call(pool.clone(), jobs.clone(), sleep_ms));
    }
    tokio::time::sleep(CALLERS_BEFORE_CRASH).await;

    // The failover, timed from the crash.
    let crash = Instant::now();
    let crash_wall = OffsetDateTime::now_utc();
    let (primary_back, crashed) = tokio::task::spawn_blocking(move || {
        let stopped = primary.stop_immediately();
        (primary, stopped)
    })
    .await?;
    primary = primary_back;
    crashed?;
    let stopped = crash.elapsed();
    // From here on the old primary is down: nothing it holds may be newer. (Until now
    // it was still taking writes: `-m immediate` takes about a tenth of a second, and
    // a commit it made then may not have been acknowledged, which is allowed.)
    let down_since = OffsetDateTime::now_utc();
    let (standby, promoted) = tokio::task::spawn_blocking(move || {
        let promoted = standby.promote();
        (standby, promoted)
    })
    .await?;
    promoted?;
    let promoted = crash.elapsed();
    relay.point_to(loopback(standby.port()));
    let pointed = crash.elapsed();
    let answering = first_answer(&url).await?;
    let answering_wall = OffsetDateTime::now_utc();
    let answering_ms = answering - crash;
    // Ours and the two copies': when each connected to the new primary, as it says.
    let listeners_back = listeners_connected(&standby.database_url(DATABASE), down_since).await?;
    // A rebooted machine: the old primary comes back on its own, where nobody should
    // write to it any more.
    let (primary, restarted) = tokio::task::spawn_blocking(move || {
        let restarted = primary.start_again();
        (primary, restarted)
    })
    .await?;
    restarted?;

    let mut results = Vec::with_capacity(callers);
    while let Some(joined) = calls.join_next().await {
        results.push(joined?);
    }
    tokio::time::sleep_until((answering + LOAD_AFTER).into()).await;
    let load = load.stop().await;

    // Every acknowledged job: on the new primary, completed.
    let mut acknowledged: Vec<i64> = load.acknowledged.clone();
    acknowledged.extend(results.iter().map(|call| call.job.0).filter(|id| *id > 0));
    acknowledged.extend(&followed);
    let settled = super::wait_until_finished(&pool, &acknowledged, lab.sizes.settle_limit).await;
    let completed = super::count_among(
        &pool,
        "SELECT count(*) FROM jobs WHERE id = ANY($1) AND state = 'completed'",
        &acknowledged,
    )
    .await?;
    let caller_ids: Vec<i64> = results.iter().map(|call| call.job.0).collect();
    let finished: Vec<(i64, Option<OffsetDateTime>)> =
        sqlx::query_as("SELECT id, finalized_at FROM jobs WHERE id = ANY($1)")
            .bind(&caller_ids[..])
            .fetch_all(&pool)
            .await?;
    let allowed = WAIT_LIMIT + answering_ms + LATENESS_ALLOWED;
    let tally = Tally::allowing(
        &results,
        |job| {
            finished
                .iter()
                .find(|row| row.0 == job.0)
                .and_then(|row| row.1)
        },
        time::Duration::milliseconds(100),
        allowed,
    );
    let mut stream_results = Vec::with_capacity(LIVE_STREAMS);
    let streams_deadline = Instant::now() + lab.sizes.settle_limit;
    while let Ok(Some(joined)) =
        tokio::time::timeout_at(streams_deadline.into(), streams.join_next()).await
    {
        stream_results.push(joined?);
    }
    let streams_carried = stream_results
        .iter()
        .filter(|result| **result == StreamEnd::SawCompletion)
        .count();

    // The old primary: written to by nobody since the crash.
    let old = PgConnection::connect(&primary.database_url(DATABASE))
        .await
        .context("cannot read the old primary after its restart")?;
    let written_after = written_since(old, down_since).await?;

    listening.stop().await;
    let mut panics = 0;
    for mut server in servers {
        server.process.stop(Duration::from_secs(10)).await;
        panics += process::panics_in(&server.process.log);
    }
    pool.close().await;
    drop(relay);
    tokio::task::spawn_blocking(move || {
        let _ = standby.stop();
        let _ = primary.stop();
    })
    .await?;

    let ms = |took: Duration| took.as_millis() as u64;
    let mut outcome = Outcome::default();
    outcome.figure("acknowledged", acknowledged.len());
    outcome.figure("completed", completed);
    outcome.figure("insert_failures", load.failures);
    outcome.figure("primary_stopped_ms", ms(stopped));
    outcome.figure("promoted_ms", ms(promoted));
    outcome.figure("relay_pointed_ms", ms(pointed));
    outcome.figure("new_primary_answered_ms", ms(answering_ms));
    let from_crash = |at: &OffsetDateTime| (*at - crash_wall).whole_milliseconds().max(0) as u64;
    outcome.figure(
        "listeners_back_ms",
        listeners_back
            .iter()
            .map(|at| from_crash(at).to_string())
            .collect::<Vec<_>>()
            .join("/"),
    );
    outcome.figure("callers", results.len());
    tally.report(&mut outcome);
    outcome.figure("streams_carried", streams_carried);
    outcome.figure("old_primary_writes_after", written_after);
    outcome.figure("panics", panics);

    outcome.check(
        settled && completed == acknowledged.len() as i64,
        format!(
            "only {completed} of {} acknowledged jobs are completed on the new primary",
            acknowledged.len()
        ),
    );
    let back_by = answering_wall + LISTENER_BACK_WITHIN;
    outcome.check(
        listeners_back.len() == LISTENERS && listeners_back.iter().all(|at| *at <= back_by),
        format!(
            "not every listener (this process's and both copies') was back within {} ms of \
             the new primary answering at {} ms: connected at {:?} ms from the crash",
            LISTENER_BACK_WITHIN.as_millis(),
            ms(answering_ms),
            listeners_back.iter().map(from_crash).collect::<Vec<_>>()
        ),
    );
    let broken_streams: Vec<String> = stream_results
        .iter()
        .filter(|result| **result != StreamEnd::SawCompletion)
        .map(|result| format!("{result:?}"))
        .collect();
    outcome.check(
        streams_carried == LIVE_STREAMS,
        format!(
            "{} of {LIVE_STREAMS} live streams carried their job's completion ({})",
            streams_carried,
            super::first_few(&broken_streams)
        ),
    );
    outcome.check(
        written_after == 0,
        format!("{written_after} jobs were written to the old primary after it went down"),
    );
    outcome.check(panics == 0, format!("{panics} panics in the servers' logs"));
    Ok(outcome)
}

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// `url` with its port replaced (to go through the relay).
fn with_port(url: &str, port: u16) -> anyhow::Result<String> {
    let mut url = url::Url::parse(url)?;
    url.set_port(Some(port))
        .map_err(|()| anyhow::anyhow!("a database URL without a host"))?;
    Ok(url.into())
}

async fn wait_for_synchronous_standby(admin: &PgPool) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let synchronous: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'",
        )
        .fetch_one(admin)
        .await?;
        if synchronous > 0 {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("the standby did not become synchronous within 30 s");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The moment a new connection through the relay first runs a statement.
async fn first_answer(url: &str) -> anyhow::Result<Instant> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(Ok(mut connection)) =
            tokio::time::timeout(Duration::from_secs(2), PgConnection::connect(url)).await
            && sqlx::query("SELECT 1")
                .execute(&mut connection)
                .await
                .is_ok()
        {
            let answered = Instant::now();
            let _ = connection.close().await;
            return Ok(answered);
        }
        if Instant::now() > deadline {
            bail!("the new primary did not answer through the relay within 60 s");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Jobs the old primary holds that were inserted or finished after `since`.
async fn written_since(mut old: PgConnection, since: OffsetDateTime) -> anyhow::Result<i64> {
    let written: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM jobs WHERE created_at >= $1 OR finalized_at >= $1",
    )
    .bind(since)
    .fetch_one(&mut old)
    .await?;
    let _ = old.close().await;
    Ok(written)
}

/// The background load (500 jobs a second): [`LOAD_BATCH`] jobs every [`LOAD_TICK`], each batch in one
/// transaction; what the database acknowledged (the commit returned) is kept.
pub(super) struct Load {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<LoadResult>,
}

pub(super) struct LoadResult {
    pub acknowledged: Vec<i64>,
    pub failures: usize,
}

impl Load {
    pub(super) fn start(pool: PgPool) -> Load {
        let stop = CancellationToken::new();
        let task = tokio::spawn(run_load(pool, stop.clone()));
        Load { stop, task }
    }

    pub(super) async fn stop(self) -> LoadResult {
        self.stop.cancel();
        self.task.await.unwrap_or(LoadResult {
            acknowledged: Vec::new(),
            failures: 0,
        })
    }
}

async fn run_load(pool: PgPool, stop: CancellationToken) -> LoadResult {
    let mut result = LoadResult {
        acknowledged: Vec::new(),
        failures: 0,
    };
    let mut ticks = tokio::time::interval(LOAD_TICK);
    // A batch that waited for the database does not make the next ones crowd in.
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let args: Vec<SleepArgs> = (0..LOAD_BATCH).map(|_| SleepArgs { ms: 0 }).collect();
    let jobs = JobClient::new(pool.clone(), 1);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return result,
            _ = ticks.tick() => {}
        }
        let inserted = async {
            let mut tx = pool.begin().await?;
            let ids = jobs.insert_many_tx::<Sleep>(&mut tx, &args).await?;
            tx.commit().await?;
            anyhow::Ok(ids)
        }
        .await;
        match inserted {
            Ok(ids) => result.acknowledged.extend(ids.iter().map(|id| id.0)),
            // Not acknowledged: it may or may not be there, and nobody was promised.
            Err(_) => result.failures += 1,
        }
    }
}

/// How a live stream ended.
#[derive(Debug, PartialEq, Eq)]
enum StreamEnd {
    SawCompletion,
    /// The server closed it before the job's completion came.
    ClosedEarly {
        job: i64,
        last_state: String,
    },
    Broke {
        job: i64,
        error: String,
    },
}

/// Reads a live stream until its job's `completed` arrives.
async fn follow(mut response: reqwest::Response, job: i64) -> StreamEnd {
    let mut buffer = String::new();
    let mut last_state = String::new();
    loop {
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            if !block.lines().any(|line| line == "event: job") {
                continue;
            }
            let data = block
                .lines()
                .find_map(|line| line.strip_prefix("data: "))
                .and_then(|data| serde_json::from_str::<Value>(data).ok());
            if let Some(data) = data
                && data["id"] == job
            {
                last_state = data["state"].as_str().unwrap_or_default().to_string();
                if last_state == "completed" {
                    return StreamEnd::SawCompletion;
                }
            }
        }
        match response.chunk().await {
            Ok(Some(bytes)) => buffer.push_str(&String::from_utf8_lossy(&bytes)),
            Ok(None) => return StreamEnd::ClosedEarly { job, last_state },
            Err(err) => {
                return StreamEnd::Broke {
                    job,
                    error: err.to_string(),
                };
            }
        }
    }
}

/// This process's listener and the two copies'.
const LISTENERS: usize = 3;

/// When the job listeners connected to the new primary (`backend_start` of its
/// `standmeet-listener` sessions begun after `since`), once all [`LISTENERS`] are there,
/// or as many as came within 10 s.
async fn listeners_connected(
    new_primary: &str,
    since: OffsetDateTime,
) -> anyhow::Result<Vec<OffsetDateTime>> {
    let mut direct = PgConnection::connect(new_primary).await?;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let started: Vec<OffsetDateTime> = sqlx::query_scalar(
            "SELECT backend_start FROM pg_stat_activity
             WHERE datname = current_database() AND application_name = 'standmeet-listener'
               AND backend_start >= $1
             ORDER BY backend_start",
        )
        .bind(since)
        .fetch_all(&mut direct)
        .await?;
        if started.len() >= LISTENERS || Instant::now() > deadline {
            let _ = direct.close().await;
            return Ok(started);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
