//! soak: everything at once for minutes, and nothing grows.
//!
//! One `standmeet serve` child; this process inserts `system.sleep` jobs of no length at
//! 500 a second (as in `failover`), keeps 50 live streams open on the server, runs 16
//! callers that each insert a job and wait for it (5 s limit) again and again, visitors
//! that search (`/api/search`, and `corpus.search` over MCP), and an admin who approves
//! five new access requests a second (the approval mails go to the SMTP peer).
//!
//! At the end of each minute it samples the server's resident memory, the database
//! connections the server holds (by `application_name`; this process's own are
//! named apart), the server's waiters (`/healthz`) and the callers' p99 commit →
//! answered over that minute, and prints them per minute.
//!
//! Promises: no 5xx and no failed call; every acknowledged job and every approval's mail
//! completes; the live streams are all open at the end; from the first minute to the
//! last, memory grows by at most a fifth (32 MiB at least, for allocator noise) and the
//! p99 stays within three times the first minute's (50 ms at least); the waiters stay
//! within what the callers and approvals can hold; and at every sample the server holds
//! no more connections than its settings allow (`ConnectionBudget`, what
//! `standmeet check-config` prints), with one LISTEN connection. Its pools open
//! connections as the load asks, up to their sizes, so a count that rises below the
//! budget is a pool filling on a busy machine; one past it is a leak. Bounds for
//! leaks, not for a noisy machine's speed.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::json;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::failover::Load;
use super::http::{ServerClient, form_body, mcp_succeeded};
use super::process;
use super::{Lab, Outcome, first_few, snippet};
use standmeet_jobs::builtin::{Sleep, SleepArgs};
use standmeet_jobs::{InsertOptions, JobClient, WaitOutcome};
use standmeet_smtp_peer::SmtpPeer;

const LIVE_STREAMS: usize = 50;
const CALLERS: usize = 16;
const SEARCHERS: usize = 4;
const APPROVALS_PER_SECOND: usize = 5;
const WAIT_LIMIT: Duration = Duration::from_secs(5);
const MINUTE: Duration = Duration::from_secs(60);
const SEARCH_WORDS: [&str; 6] = ["rust", "postgres", "東京", "meeting", "job board", "x"];

/// What one minute looked like.
#[derive(Clone, Debug, Default)]
struct Minute {
    rss_kib: u64,
    connections: Connections,
    server_waiters: i64,
    calls: usize,
    p99_ms: u64,
}

/// The connections to the scenario's database at one moment, by whose they are.
#[derive(Clone, Copy, Debug, Default)]
struct Connections {
    /// The server's: its pools and its LISTEN connection.
    server: i64,
    /// The server's LISTEN connections (one, unless one leaked).
    server_listeners: i64,
    /// This process's: its pool and its own LISTEN connection.
    harness: i64,
}

impl Connections {
    /// Counts them by `application_name`: the server's pools are `standmeet`,
    /// `standmeet-jobs` and `standmeet-engine`; LISTEN connections, the server's and
    /// this process's one, are `standmeet-listener`.
    async fn count(pool: &sqlx::PgPool) -> anyhow::Result<Connections> {
        let (pools, listeners, harness): (i64, i64, i64) = sqlx::query_as(
            "SELECT count(*) FILTER (WHERE application_name IN ('standmeet', 'standmeet-jobs', 'standmeet-engine')),
                    count(*) FILTER (WHERE application_name = 'standmeet-listener'),
                    count(*) FILTER (WHERE application_name = $1)
             FROM pg_stat_activity WHERE datname = current_database()",
        )
        .bind(super::HARNESS_APPLICATION)
        .fetch_one(pool)
        .await?;
        let server_listeners = listeners - HARNESS_LISTENERS;
        Ok(Connections {
            server: pools + server_listeners,
            server_listeners,
            harness: harness + HARNESS_LISTENERS,
        })
    }
}

/// This process's LISTEN connections (its `JobClient`'s, for the callers' waits).
const HARNESS_LISTENERS: i64 = 1;

/// What the activities found wrong, in words, as they go.
#[derive(Default)]
struct Troubles {
    server_errors: Vec<String>,
    failed_calls: Vec<String>,
}

pub(crate) async fn run(lab: &Lab) -> anyhow::Result<Outcome> {
    let minutes = lab.sizes.soak_minutes;
    let (url, pool) = lab.fresh_database("chaos_soak").await?;
    let sink = SmtpPeer::start().await?;
    let log = lab.log_path("soak-server.log");
    let mut server = process::start_server(&url, sink.port, &log).await?;
    let client = ServerClient::sign_in(&server).await?;
    let jobs = JobClient::new(pool.clone(), CALLERS);
    let listening = jobs.listen();
    super::pg_restart::wait_for_listeners(&pool, 2).await?;
    let pid = server.process.pid().unwrap_or_default();
    let budget = server.connection_budget()?;

    let stop = CancellationToken::new();
    let troubles = Arc::new(Mutex::new(Troubles::default()));
    let latencies: Arc<Mutex<Vec<Duration>>> = Arc::default();
    let mut activities = JoinSet::new();

    // Fifty live streams, each following a job due after the run: they stay open,
    // and their first event comes at once.
    let due = time::OffsetDateTime::now_utc() + MINUTE * (minutes + 10);
    let mut streams = Vec::with_capacity(LIVE_STREAMS);
    for _ in 0..LIVE_STREAMS {
        let options = InsertOptions {
            scheduled_at: Some(due),
            ..InsertOptions::default()
        };
        let job = jobs
            .insert_with::<Sleep>(&SleepArgs { ms: 0 }, options)
            .await?;
        streams.push(client.live(&[job.0]).await?);
    }
    let stream_ends = Arc::new(Mutex::new(0usize));
    for response in streams {
        activities.spawn(hold_stream(response, stop.clone(), stream_ends.clone()));
    }
    for _ in 0..CALLERS {
        activities.spawn(call_again_and_again(
            jobs.clone(),
            stop.clone(),
            latencies.clone(),
            troubles.clone(),
        ));
    }
    for n in 0..SEARCHERS {
        activities.spawn(search_again_and_again(
            client.clone(),
            server.base_url.clone(),
            n,
            stop.clone(),
            troubles.clone(),
        ));
    }
    activities.spawn(approve_again_and_again(
        pool.clone(),
        client.clone(),
        stop.clone(),
        troubles.clone(),
    ));
    let load = Load::start(pool.clone());

    let began = Instant::now();
    let mut per_minute = Vec::with_capacity(minutes as usize);
    for minute in 1..=minutes {
        tokio::time::sleep_until((began + MINUTE * minute).into()).await;
        let mut taken: Vec<Duration> =
            std::mem::take(&mut *latencies.lock().expect("not poisoned"));
        taken.sort();
        let p99 = taken
            .get((taken.len() * 99 / 100).min(taken.len().saturating_sub(1)))
            .copied()
            .unwrap_or_default();
        let connections = Connections::count(&pool).await?;
        let waiters = client
            .health()
            .await
            .and_then(|health| health["waiters"].as_i64())
            .unwrap_or(-1);
        let sample = Minute {
            rss_kib: resident_kib(pid),
            connections,
            server_waiters: waiters,
            calls: taken.len(),
            p99_ms: p99.as_millis() as u64,
        };
        eprintln!(
            "chaos: soak minute {minute}: rss {} MiB, {} connections of the server's (at most {}), {} of this process's, {} waiters, {} calls, p99 {} ms",
            sample.rss_kib / 1024,
            sample.connections.server,
            budget.total(),
            sample.connections.harness,
            sample.server_waiters,
            sample.calls,
            sample.p99_ms
        );
        per_minute.push(sample);
    }

    stop.cancel();
    let load = load.stop().await;
    while activities.join_next().await.is_some() {}
    let approval_mails: Vec<i64> =
        sqlx::query_scalar("SELECT mail_job_id FROM access_requests WHERE mail_job_id IS NOT NULL")
            .fetch_all(&pool)
            .await?;
    let mut everything = load.acknowledged.clone();
    everything.extend(&approval_mails);
    let settled = super::wait_until_finished(&pool, &everything, lab.sizes.settle_limit).await;
    let completed = super::count_among(
        &pool,
        "SELECT count(*) FROM jobs WHERE id = ANY($1) AND state = 'completed'",
        &everything,
    )
    .await?;
    let streams_ended_early = *stream_ends.lock().expect("not poisoned");

    listening.stop().await;
    let stopped_cleanly = server.process.stop(Duration::from_secs(15)).await.is_some();
    let panics = process::panics_in(&log);
    pool.close().await;

    let troubles = std::mem::take(&mut *troubles.lock().expect("not poisoned"));
    let mut outcome = Outcome::default();
    outcome.figure("minutes", minutes);
    outcome.figure("jobs", load.acknowledged.len());
    outcome.figure("approvals", approval_mails.len());
    outcome.figure("completed", completed);
    let column = |value: fn(&Minute) -> u64| -> String {
        per_minute
            .iter()
            .map(|minute| value(minute).to_string())
            .collect::<Vec<_>>()
            .join("/")
    };
    outcome.figure("rss_mib", column(|m| m.rss_kib / 1024));
    outcome.figure(
        "server_connections",
        column(|m| m.connections.server as u64),
    );
    outcome.figure("server_connections_allowed", budget.total());
    outcome.figure(
        "harness_connections",
        column(|m| m.connections.harness as u64),
    );
    outcome.figure("waiters", column(|m| m.server_waiters.max(0) as u64));
    outcome.figure("calls", column(|m| m.calls as u64));
    outcome.figure("p99_ms", column(|m| m.p99_ms));
    outcome.figure("server_errors", troubles.server_errors.len());
    outcome.figure("failed_calls", troubles.failed_calls.len());
    outcome.figure("streams_ended_early", streams_ended_early);
    outcome.figure("panics", panics);

    outcome.check(
        troubles.server_errors.is_empty(),
        format!("5xx answers: {}", first_few(&troubles.server_errors)),
    );
    outcome.check(
        troubles.failed_calls.is_empty(),
        format!("failed calls: {}", first_few(&troubles.failed_calls)),
    );
    outcome.check(
        settled && completed == everything.len() as i64,
        format!("only {completed} of {} jobs completed", everything.len()),
    );
    outcome.check(
        streams_ended_early == 0,
        format!("{streams_ended_early} live streams ended before the run did"),
    );
    if let (Some(first), Some(last)) = (per_minute.first(), per_minute.last()) {
        let memory_allowed = first.rss_kib + (first.rss_kib / 5).max(32 * 1024);
        outcome.check(
            last.rss_kib <= memory_allowed,
            format!(
                "the server's memory grew from {} to {} MiB",
                first.rss_kib / 1024,
                last.rss_kib / 1024
            ),
        );
        let waiters_possible = (CALLERS + APPROVALS_PER_SECOND * 10) as i64;
        outcome.check(
            per_minute
                .iter()
                .all(|minute| (0..=waiters_possible).contains(&minute.server_waiters)),
            format!(
                "the server's waiters left their bounds: {}",
                column(|m| m.server_waiters.max(0) as u64)
            ),
        );
        outcome.check(
            last.p99_ms <= (first.p99_ms * 3).max(50),
            format!(
                "the callers' p99 grew from {} to {} ms",
                first.p99_ms, last.p99_ms
            ),
        );
    }
    outcome.check(
        per_minute
            .iter()
            .all(|minute| minute.connections.server <= i64::from(budget.total())),
        format!(
            "the server held more connections than its settings allow ({}): {}",
            budget.total(),
            column(|m| m.connections.server as u64)
        ),
    );
    outcome.check(
        per_minute
            .iter()
            .all(|minute| minute.connections.server_listeners == 1),
        format!(
            "the server's LISTEN connections were not one each minute: {}",
            column(|m| m.connections.server_listeners.max(0) as u64)
        ),
    );
    outcome.check(
        stopped_cleanly,
        "the server did not stop cleanly on SIGTERM",
    );
    outcome.check(panics == 0, format!("{panics} panics in the server's log"));
    Ok(outcome)
}

/// The resident memory of process `pid` in KiB (`VmRSS` in `/proc/<pid>/status`).
fn resident_kib(pid: u32) -> u64 {
    process::status_kib(pid, "VmRSS").unwrap_or(0)
}

/// Reads a live stream until `stop`; counts it in `ended_early` if the server ends it
/// first.
async fn hold_stream(
    mut response: reqwest::Response,
    stop: CancellationToken,
    ended_early: Arc<Mutex<usize>>,
) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            chunk = response.chunk() => match chunk {
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => {
                    *ended_early.lock().expect("not poisoned") += 1;
                    return;
                }
            },
        }
    }
}

/// One caller: inserts a job of no length and waits for it, until `stop`; records
/// insert-committed → answered.
async fn call_again_and_again(
    jobs: JobClient,
    stop: CancellationToken,
    latencies: Arc<Mutex<Vec<Duration>>>,
    troubles: Arc<Mutex<Troubles>>,
) {
    while !stop.is_cancelled() {
        let job = match jobs.insert::<Sleep>(&SleepArgs { ms: 0 }).await {
            Ok(job) => job,
            Err(err) => {
                troubles
                    .lock()
                    .expect("not poisoned")
                    .failed_calls
                    .push(format!("insert: {err:#}"));
                continue;
            }
        };
        let committed = Instant::now();
        match jobs.wait(&[job], WAIT_LIMIT).await {
            Ok(WaitOutcome::Done(_)) => latencies
                .lock()
                .expect("not poisoned")
                .push(committed.elapsed()),
            Ok(WaitOutcome::Receipt) => troubles
                .lock()
                .expect("not poisoned")
                .failed_calls
                .push(format!("job {job} was not done within {WAIT_LIMIT:?}")),
            Err(err) => troubles
                .lock()
                .expect("not poisoned")
                .failed_calls
                .push(format!("job {job}: {err}")),
        }
    }
}

/// A visitor searching (the search server function) and an agent searching
/// (`corpus.search`), in turn, until `stop`.
async fn search_again_and_again(
    admin: ServerClient,
    base_url: String,
    n: usize,
    stop: CancellationToken,
    troubles: Arc<Mutex<Troubles>>,
) {
    let Ok(visitor) = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
    else {
        return;
    };
    let mut round = n;
    while !stop.is_cancelled() {
        let word = SEARCH_WORDS[round % SEARCH_WORDS.len()];
        round += 1;
        // (what, status, whether it did what was asked, body)
        let (what, answer) = if round.is_multiple_of(2) {
            let query = url::form_urlencoded::Serializer::new(String::new())
                .append_pair("q", word)
                .finish();
            let answer = visitor
                .get(format!("{base_url}/api/search?{query}"))
                .header("accept", "application/json")
                .send()
                .await;
            let answer = match answer {
                Ok(reply) => {
                    let status = reply.status().as_u16();
                    Ok((
                        status,
                        status == 200,
                        reply.text().await.unwrap_or_default(),
                    ))
                }
                Err(err) => Err(err.to_string()),
            };
            ("search", answer)
        } else {
            let answer = admin
                .mcp_tool("corpus.search", json!({ "q": word }))
                .await
                .map_err(|err| err.to_string())
                .map(|answer| (answer.status, mcp_succeeded(&answer), answer.body));
            ("corpus.search", answer)
        };
        let mut troubles = troubles.lock().expect("not poisoned");
        match answer {
            Ok((status, _, body)) if status >= 500 => troubles
                .server_errors
                .push(format!("{what} {word:?}: {status} {}", snippet(&body))),
            Ok((status, false, body)) => troubles
                .failed_calls
                .push(format!("{what} {word:?}: {status} {}", snippet(&body))),
            Ok(_) => {}
            Err(err) => troubles
                .failed_calls
                .push(format!("{what} {word:?}: {err}")),
        }
    }
}

/// An admin approving new access requests ([`APPROVALS_PER_SECOND`]), until `stop`.
/// The requests are written straight into the database, as `approvals` does.
async fn approve_again_and_again(
    pool: sqlx::PgPool,
    admin: ServerClient,
    stop: CancellationToken,
    troubles: Arc<Mutex<Troubles>>,
) {
    let mut ticks = tokio::time::interval(Duration::from_secs(1) / APPROVALS_PER_SECOND as u32);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut n: u64 = 0;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = ticks.tick() => {}
        }
        n += 1;
        let inserted: Result<i64, sqlx::Error> = sqlx::query_scalar(
            "INSERT INTO access_requests (name, email, message)
             VALUES ('Soak Visitor ' || $1, 'soak-' || $1 || '@chaos.example.com', 'Please.')
             RETURNING id",
        )
        .bind(n as i64)
        .fetch_one(&pool)
        .await;
        let id = match inserted {
            Ok(id) => id,
            Err(err) => {
                troubles
                    .lock()
                    .expect("not poisoned")
                    .failed_calls
                    .push(format!("cannot write an access request: {err}"));
                continue;
            }
        };
        let form = form_body(&[("id", id.to_string().as_bytes())]);
        let answer = admin
            .server_fn(
                Method::POST,
                "access_requests/approve",
                Some(("application/x-www-form-urlencoded", form)),
            )
            .await;
        let mut troubles = troubles.lock().expect("not poisoned");
        match answer {
            Ok(answer) if answer.status >= 500 => troubles.server_errors.push(format!(
                "approve {id}: {} {}",
                answer.status,
                snippet(&answer.body)
            )),
            Ok(answer) if answer.status != 200 => troubles.failed_calls.push(format!(
                "approve {id}: {} {}",
                answer.status,
                snippet(&answer.body)
            )),
            Ok(_) => {}
            Err(err) => troubles.failed_calls.push(format!("approve {id}: {err}")),
        }
    }
}
