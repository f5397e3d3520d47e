//! blackhole: the LISTEN connection goes silent without being closed (a NAT or a load
//! balancer dropped it), and nobody waits past their limit for a job that finished.
//!
//! As in `pg-restart`, one worker process runs the jobs and 64 callers here each insert
//! a `system.sleep` job (0–3 s) and wait for it with a 5 s limit. This process's LISTEN
//! connection goes through a relay ([`Relay`]); 500 ms in, the relay goes silent: that
//! connection, and every new one through it, gets no byte through again, and none is
//! closed. Twelve seconds later the relay heals (new connections go through).
//!
//! Promises: the listener notices the silence within 10 s (it asks the server for a
//! word after 5 s of quiet, and gives up on it after 3 more) and says it is
//! reconnecting (what `/healthz` shows); it is connected again within 10 s of the heal;
//! meanwhile the waiters fall back to re-reading their jobs (once a second), so every
//! caller returns within its limit + 1 s, and none gets a receipt for a job that had
//! finished more than that re-read's second (and 100 ms for the clocks) before.

use std::str::FromStr;
use std::time::{Duration, Instant};

use sqlx::postgres::PgConnectOptions;
use time::OffsetDateTime;
use tokio::task::JoinSet;

use super::pg_restart::{self, LONGEST_SLEEP_MS, Tally};
use super::process;
use super::relay::Relay;
use super::{Lab, Outcome};
use standmeet_jobs::JobClient;
use standmeet_jobs::listener::ListenerState;

const SILENT_AFTER: Duration = Duration::from_millis(500);
const HEAL_AFTER: Duration = Duration::from_secs(12);
const NOTICE_WITHIN: Duration = Duration::from_secs(10);
const RECONNECT_WITHIN: Duration = Duration::from_secs(10);
/// How long before a receipt a job may have finished without its answer counting as
/// lost: the waiters' re-read while notifications do not come, and the clocks.
const REREAD_SLACK: time::Duration = time::Duration::milliseconds(1_100);

pub(crate) async fn run(lab: &Lab) -> anyhow::Result<Outcome> {
    let callers = lab.sizes.restart_callers;
    let (url, pool) = lab.fresh_database("chaos_blackhole").await?;
    let log = lab.log_path("blackhole-worker.log");
    let mut worker = process::spawn_worker(&url, callers, &log)?;

    let direct = PgConnectOptions::from_str(&url)?;
    let relay = Relay::start(std::net::SocketAddr::from((
        [127, 0, 0, 1],
        direct.get_port(),
    )))
    .await?;
    let jobs = JobClient::new(pool.clone(), callers);
    let listening = jobs.listen_at(direct.clone().port(relay.address().port()));
    pg_restart::wait_for_listeners(&pool, 2).await?;

    let mut calls = JoinSet::new();
    for n in 0..callers {
        let sleep_ms = LONGEST_SLEEP_MS * n as u64 / (callers.max(2) - 1) as u64;
        calls.spawn(pg_restart::call(pool.clone(), jobs.clone(), sleep_ms));
    }
    tokio::time::sleep(SILENT_AFTER).await;
    relay.go_silent();
    let silenced = Instant::now();
    let noticed = watch_until(&jobs, silenced + Duration::from_secs(30), |state| {
        state != ListenerState::Connected
    })
    .await;
    let said_reconnecting = jobs.listener_state() == ListenerState::Reconnecting;
    tokio::time::sleep_until((silenced + HEAL_AFTER).into()).await;
    relay.heal();
    let healed = Instant::now();
    let reconnected = watch_until(&jobs, healed + Duration::from_secs(30), |state| {
        state == ListenerState::Connected
    })
    .await;

    let mut results = Vec::with_capacity(callers);
    while let Some(joined) = calls.join_next().await {
        results.push(joined?);
    }
    let ids: Vec<i64> = results.iter().map(|call| call.job.0).collect();
    let settled = super::wait_until_finished(&pool, &ids, lab.sizes.settle_limit).await;
    let finished: Vec<(i64, Option<OffsetDateTime>, String)> =
        sqlx::query_as("SELECT id, finalized_at, state::text FROM jobs WHERE id = ANY($1)")
            .bind(&ids[..])
            .fetch_all(&pool)
            .await?;

    let tally = Tally::of(
        &results,
        |job| {
            finished
                .iter()
                .find(|row| row.0 == job.0)
                .and_then(|row| row.1)
        },
        REREAD_SLACK,
    );
    let completed = finished.iter().filter(|row| row.2 == "completed").count();

    listening.stop().await;
    drop(relay);
    worker.stop(Duration::from_secs(10)).await;
    let panics = process::panics_in(&log);
    pool.close().await;

    let ms = |at: Option<Instant>, from: Instant| at.map(|at| (at - from).as_millis() as u64);
    let mut outcome = Outcome::default();
    outcome.figure("callers", callers);
    tally.report(&mut outcome);
    outcome.figure("noticed_ms", ms(noticed, silenced));
    outcome.figure("said_reconnecting", said_reconnecting);
    outcome.figure("healed_at_ms", (healed - silenced).as_millis() as u64);
    outcome.figure("reconnected_ms", ms(reconnected, healed));
    outcome.figure("completed", completed);
    outcome.figure("panics", panics);

    outcome.check(
        noticed.is_some_and(|at| at - silenced <= NOTICE_WITHIN),
        format!(
            "the listener did not notice the silence within {} s ({:?} ms)",
            NOTICE_WITHIN.as_secs(),
            ms(noticed, silenced)
        ),
    );
    outcome.check(
        said_reconnecting,
        "the listener did not say it was reconnecting once it noticed",
    );
    outcome.check(
        reconnected.is_some_and(|at| at - healed <= RECONNECT_WITHIN),
        format!(
            "the listener was not connected again within {} s of the heal ({:?} ms)",
            RECONNECT_WITHIN.as_secs(),
            ms(reconnected, healed)
        ),
    );
    outcome.check(
        settled && completed == ids.len(),
        format!("only {completed} of {} jobs completed", ids.len()),
    );
    outcome.check(panics == 0, format!("{panics} panics in the worker's log"));
    Ok(outcome)
}

/// Looks at the listener every 10 ms until `wanted` holds of its state (the moment it
/// did) or `deadline` passes (`None`).
async fn watch_until(
    jobs: &JobClient,
    deadline: Instant,
    wanted: impl Fn(ListenerState) -> bool,
) -> Option<Instant> {
    while Instant::now() < deadline {
        if wanted(jobs.listener_state()) {
            return Some(Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    None
}
