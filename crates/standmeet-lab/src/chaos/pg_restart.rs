//! pg-restart: PostgreSQL restarts under waiting callers, and no caller hangs or loses
//! its answer.
//!
//! One worker process runs the jobs. In this process, a listener feeds the waiters,
//! as in a server. 64 callers each insert a `system.sleep` job (0–3 s, spread evenly)
//! and wait for it with a 5 s limit; 500 ms later the cluster is restarted
//! (`pg_ctl restart -m fast`), which cuts every connection, the listener's included.
//!
//! Promises: every caller returns within its limit + 1 s; and no answer is lost: a
//! caller that got a receipt must not have been able to have the answer, that is, its
//! job must not have been finished when the wait ended (its `finalized_at`, read
//! afterwards, must not be earlier than that moment, with 100 ms for the clock and
//! for `now()` being the start of the finishing transaction). Jobs cut off by the
//! restart are rescued and run again; in the end every job completes.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use sqlx::PgPool;
use time::OffsetDateTime;
use tokio::task::JoinSet;

use super::process;
use super::{Lab, Outcome};
use standmeet_jobs::builtin::{Sleep, SleepArgs};
use standmeet_jobs::{JobClient, JobId, WaitOutcome};

pub(super) const WAIT_LIMIT: Duration = Duration::from_secs(5);
/// How much later than its limit a wait may end and still count as on time.
pub(super) const LATENESS_ALLOWED: Duration = Duration::from_secs(1);
const RESTART_AFTER: Duration = Duration::from_millis(500);
pub(super) const LONGEST_SLEEP_MS: u64 = 3_000;
const CLOCK_SLACK: time::Duration = time::Duration::milliseconds(100);

/// What one caller saw.
pub(super) struct Call {
    pub job: JobId,
    pub answered: bool,
    pub took: Duration,
    /// The wall-clock moment the wait ended, to compare with `finalized_at`.
    pub ended_at: OffsetDateTime,
    /// Something that is neither an answer nor a receipt.
    pub problem: Option<String>,
}

pub(crate) async fn run(lab: &Lab) -> anyhow::Result<Outcome> {
    let callers = lab.sizes.restart_callers;
    let (url, pool) = lab.fresh_database("chaos_pg_restart").await?;
    let log = lab.log_path("pg-restart-worker.log");
    // Slots for every caller's job at once: the sleeps run side by side.
    let mut worker = process::spawn_worker(&url, callers, &log)?;

    let jobs = JobClient::new(pool.clone(), callers);
    let listening = jobs.listen();
    // Ours and the worker's: then notifications flow both ways before the first insert.
    wait_for_listeners(&pool, 2).await?;

    let mut calls = JoinSet::new();
    for n in 0..callers {
        let sleep_ms = LONGEST_SLEEP_MS * n as u64 / (callers.max(2) - 1) as u64;
        calls.spawn(call(pool.clone(), jobs.clone(), sleep_ms));
    }
    tokio::time::sleep(RESTART_AFTER).await;
    let cluster = lab.cluster.clone();
    let restart_began = Instant::now();
    tokio::task::spawn_blocking(move || cluster.restart())
        .await?
        .context("the cluster did not restart")?;
    let restart_took = restart_began.elapsed();
    let mut results = Vec::with_capacity(callers);
    while let Some(joined) = calls.join_next().await {
        results.push(joined?);
    }

    let ids: Vec<i64> = results.iter().map(|call| call.job.0).collect();
    let settled = super::wait_until_finished(&pool, &ids, lab.sizes.settle_limit).await;
    let rows: Vec<(i64, String, Option<OffsetDateTime>, bool)> = sqlx::query_as(
        "SELECT id, state::text, finalized_at, errors::text LIKE '%worker lost%'
         FROM jobs WHERE id = ANY($1)",
    )
    .bind(&ids[..])
    .fetch_all(&pool)
    .await?;
    let jobs: HashMap<i64, (String, Option<OffsetDateTime>, bool)> = rows
        .into_iter()
        .map(|(id, state, finalized_at, rescued)| (id, (state, finalized_at, rescued)))
        .collect();

    let tally = Tally::of(
        &results,
        |job| {
            jobs.get(&job.0)
                .and_then(|(_, finalized_at, _)| *finalized_at)
        },
        CLOCK_SLACK,
    );
    let completed = jobs
        .values()
        .filter(|(state, _, _)| state == "completed")
        .count();
    let rescued = jobs.values().filter(|(_, _, rescued)| *rescued).count();

    listening.stop().await;
    worker.stop(Duration::from_secs(10)).await;
    let panics = process::panics_in(&log);
    pool.close().await;

    let mut outcome = Outcome::default();
    outcome.figure("callers", callers);
    tally.report(&mut outcome);
    outcome.figure("restart_ms", restart_took.as_millis() as u64);
    outcome.figure("completed", completed);
    outcome.figure("rescued", rescued);
    outcome.figure("panics", panics);
    outcome.check(
        settled && completed == ids.len(),
        format!(
            "only {completed} of {} jobs completed within {} s",
            ids.len(),
            lab.sizes.settle_limit.as_secs()
        ),
    );
    outcome.check(panics == 0, format!("{panics} panics in the worker's log"));
    Ok(outcome)
}

/// What the callers' waits came to.
pub(super) struct Tally {
    /// How long a wait may take and still be on time.
    allowed: Duration,
    answered: usize,
    receipts: usize,
    late: usize,
    slowest: Duration,
    lost_answers: Vec<String>,
    problems: Vec<String>,
}

impl Tally {
    /// Counts `calls`; a receipt is a lost answer when its job (`finalized_at` of it)
    /// had finished more than `slack` before the wait ended.
    pub(super) fn of(
        calls: &[Call],
        finalized_at: impl Fn(JobId) -> Option<OffsetDateTime>,
        slack: time::Duration,
    ) -> Tally {
        Self::allowing(calls, finalized_at, slack, WAIT_LIMIT + LATENESS_ALLOWED)
    }

    /// [`Tally::of`], with waits on time when they took at most `allowed`.
    pub(super) fn allowing(
        calls: &[Call],
        finalized_at: impl Fn(JobId) -> Option<OffsetDateTime>,
        slack: time::Duration,
        allowed: Duration,
    ) -> Tally {
        let mut tally = Tally {
            allowed,
            answered: 0,
            receipts: 0,
            late: 0,
            slowest: Duration::ZERO,
            lost_answers: Vec::new(),
            problems: Vec::new(),
        };
        for call in calls {
            if let Some(problem) = &call.problem {
                tally.problems.push(problem.clone());
                continue;
            }
            tally.slowest = tally.slowest.max(call.took);
            if call.took > allowed {
                tally.late += 1;
            }
            if call.answered {
                tally.answered += 1;
                continue;
            }
            tally.receipts += 1;
            if let Some(finalized_at) = finalized_at(call.job)
                && finalized_at + slack < call.ended_at
            {
                tally.lost_answers.push(format!(
                    "job {} finished {} ms before its caller got a receipt",
                    call.job,
                    (call.ended_at - finalized_at).whole_milliseconds()
                ));
            }
        }
        tally
    }

    /// Its figures, and the promises it shows broken.
    pub(super) fn report(&self, outcome: &mut Outcome) {
        outcome.figure("answered", self.answered);
        outcome.figure("receipts", self.receipts);
        outcome.figure("lost_answers", self.lost_answers.len());
        outcome.figure("late", self.late);
        outcome.figure("slowest_wait_ms", self.slowest.as_millis() as u64);
        outcome.figure("problems", self.problems.len());
        outcome.check(
            self.problems.is_empty(),
            format!("callers failed: {}", self.problems.join("; ")),
        );
        outcome.check(
            self.late == 0,
            format!(
                "{} callers waited longer than {} ms (their {} s limit and what the fault \
                 allows; slowest {} ms)",
                self.late,
                self.allowed.as_millis(),
                WAIT_LIMIT.as_secs(),
                self.slowest.as_millis()
            ),
        );
        outcome.check(
            self.lost_answers.is_empty(),
            format!("answers lost to receipts: {}", self.lost_answers.join("; ")),
        );
    }
}

/// One caller: inserts its job, then waits for it as an operation in a server would.
pub(super) async fn call(pool: PgPool, jobs: JobClient, sleep_ms: u64) -> Call {
    let job = match insert_patiently(&pool, sleep_ms).await {
        Ok(job) => job,
        Err(err) => {
            return Call {
                job: JobId(0),
                answered: false,
                took: Duration::ZERO,
                ended_at: OffsetDateTime::now_utc(),
                problem: Some(format!("cannot insert a job: {err:#}")),
            };
        }
    };
    let began = Instant::now();
    let waited = jobs.wait(&[job], WAIT_LIMIT).await;
    let took = began.elapsed();
    let ended_at = OffsetDateTime::now_utc();
    let (answered, problem) = match waited {
        Ok(WaitOutcome::Done(_)) => (true, None),
        Ok(WaitOutcome::Receipt) => (false, None),
        Err(err) => (false, Some(format!("job {job}: {err}"))),
    };
    Call {
        job,
        answered,
        took,
        ended_at,
        problem,
    }
}

/// The insert is not what is tested: should it meet the restart, it tries again.
async fn insert_patiently(pool: &PgPool, sleep_ms: u64) -> anyhow::Result<JobId> {
    let deadline = Instant::now() + Duration::from_secs(15);
    let jobs = JobClient::new(pool.clone(), 1);
    loop {
        match jobs.insert::<Sleep>(&SleepArgs { ms: sleep_ms }).await {
            Ok(job) => return Ok(job),
            Err(err) if Instant::now() > deadline => return Err(err.into()),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// Waits until `count` job listeners (StandMeet's LISTEN connections) are connected to
/// this database.
pub(super) async fn wait_for_listeners(pool: &PgPool, count: i64) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let connected: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
             WHERE datname = current_database() AND application_name = 'standmeet-listener'",
        )
        .fetch_one(pool)
        .await?;
        if connected >= count {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("only {connected} of {count} job listeners connected within 30 s");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
