//! Waiting for jobs: answers when they finish, receipts at the limit or when every
//! slot is taken, and no answer lost to a dropped LISTEN connection or a PostgreSQL
//! restart.

mod common;

use std::time::{Duration, Instant};

use common::jobs::{finish_by_hand, insert, spawn_wait, until_waiting, wait_until};
use serde_json::json;
use sqlx::PgPool;
use standmeet_jobs::builtin::{self, Noop, Sleep, SleepArgs};
use standmeet_jobs::listener::Listening;
use standmeet_jobs::{
    EngineConfig, Error, JobClient, JobId, JobRow, JobRuntime, JobState, WaitOutcome,
};

/// A client with a running listener, as in a StandMeet process.
struct Listened {
    jobs: JobClient,
    listening: Listening,
}

impl Listened {
    /// Stops the listener and waits until its connection is closed, so the test's
    /// database can be dropped at once.
    async fn close(self) {
        self.listening.stop().await;
    }
}

async fn listening(pool: &PgPool, max_waiters: usize) -> Listened {
    let jobs = JobClient::new(pool.clone(), max_waiters);
    let listening = jobs.listen();
    wait_until(Duration::from_secs(10), || async {
        jobs.listener_connected()
    })
    .await;
    Listened { jobs, listening }
}

fn done_rows(outcome: WaitOutcome) -> Vec<JobRow> {
    match outcome {
        WaitOutcome::Done(rows) => rows,
        WaitOutcome::Receipt => panic!("expected the finished jobs, got a receipt"),
    }
}

#[sqlx::test]
async fn a_job_finished_before_the_wait_is_answered_at_once(pool: PgPool) {
    // No listener, so neither a notification nor the once-a-second re-read can answer
    // this wait: only the look at the rows that a wait takes once registered. Without
    // it the wait would end in a receipt after 10 s. (Was: an answer within 500 ms,
    // to tell it from the re-read, which a loaded machine does not always keep.)
    let jobs = JobClient::new(pool.clone(), 64);
    let id = insert::<Noop>(&pool, &json!({})).await.unwrap();
    finish_by_hand(&pool, id).await;
    let rows = done_rows(jobs.wait(&[id], Duration::from_secs(10)).await.unwrap());
    assert_eq!(rows[0].state, JobState::Completed);
    assert_eq!(rows[0].output, Some(json!({"by": "hand"})));
}

/// Waits for job `id` while an engine of this process runs it, with the engine's own
/// news as the only news: its listener listens in another database (the server's
/// `postgres`), where no notification of this one arrives, and the waiter's pool is
/// closed once it waits, so that a read would fail and end the wait in a receipt.
/// Answers the row the wait answered with and the row as stored.
async fn answered_with_no_query(pool: &PgPool, id: JobId) -> (JobRow, JobRow) {
    let waiter_pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect_with((*pool.connect_options()).clone())
        .await
        .unwrap();
    let jobs = JobClient::new(waiter_pool.clone(), 8);
    let waiting = spawn_wait(&jobs, &[id], Duration::from_secs(10));
    wait_until(Duration::from_secs(10), || async { jobs.waits_for(id) }).await;
    // Waits for the wait's first look at the rows, when it has begun.
    waiter_pool.close().await;

    let elsewhere = std::env::var("DATABASE_URL").expect("the tests' server");
    let config = EngineConfig {
        listen_database_url: Some(elsewhere),
        ..common::jobs::quick_config(4)
    };
    let engine = common::jobs::TestEngine::new(
        JobRuntime::start(pool, builtin::registry(), config, &jobs)
            .await
            .expect("the engine starts"),
        jobs.clone(),
    );
    let (outcome, _) = waiting.await.unwrap();
    let answered = done_rows(outcome.unwrap()).remove(0);
    engine.shutdown().await;
    (answered, common::jobs::job(pool, id).await)
}

fn assert_same_row(answered: &JobRow, stored: &JobRow) {
    assert_eq!(answered.state, JobState::Completed);
    assert_eq!(
        (
            answered.attempt,
            answered.attempted_at,
            answered.finalized_at
        ),
        (stored.attempt, stored.attempted_at, stored.finalized_at)
    );
    assert_eq!(
        (&answered.output, &answered.errors),
        (&stored.output, &stored.errors)
    );
}

#[sqlx::test]
async fn a_job_a_claim_here_finishes_reaches_its_waiter_whole_without_a_query(pool: PgPool) {
    // A no-op answers with its arguments: here JSON `null`, which must not read back
    // as no output at all.
    let id = insert::<Noop>(&pool, &json!(null)).await.unwrap();
    let (answered, stored) = answered_with_no_query(&pool, id).await;
    assert_same_row(&answered, &stored);
    assert_eq!(answered.output, Some(serde_json::Value::Null));
}

#[sqlx::test]
async fn a_job_the_completer_here_finishes_reaches_its_waiter_whole_without_a_query(pool: PgPool) {
    // Longer than a claim's window: written `running` by its claim, then finished by
    // the completer.
    let id = insert::<Sleep>(&pool, &SleepArgs { ms: 100 })
        .await
        .unwrap();
    let (answered, stored) = answered_with_no_query(&pool, id).await;
    assert_same_row(&answered, &stored);
    assert_eq!(answered.output, Some(json!({"slept_ms": 100})));
}

#[sqlx::test]
async fn a_job_that_never_finishes_gets_a_receipt_at_the_limit(pool: PgPool) {
    let listening = listening(&pool, 64).await;
    let jobs = listening.jobs.clone();
    let id = insert::<Noop>(&pool, &json!({})).await.unwrap();
    let limit = Duration::from_millis(400);
    let started = Instant::now();
    let outcome = jobs.wait(&[id], limit).await.unwrap();
    let took = started.elapsed();
    assert!(matches!(outcome, WaitOutcome::Receipt));
    assert!(took >= limit, "not before the limit: {took:?}");
    // Soon after it, as a loaded 2-core machine counts soon (was: within 250 ms).
    assert!(
        took < limit + Duration::from_secs(2),
        "soon after it: {took:?}"
    );
    assert_eq!(jobs.waiters().receipts, 1);
    assert_eq!(jobs.waiters().waiting, 0);
    listening.close().await;
}

#[sqlx::test]
async fn a_wait_for_several_jobs_answers_when_the_last_one_finishes_in_the_order_asked(
    pool: PgPool,
) {
    let listening = listening(&pool, 64).await;
    let jobs = listening.jobs.clone();
    let a = insert::<Noop>(&pool, &json!({"n": "a"})).await.unwrap();
    let b = insert::<Noop>(&pool, &json!({"n": "b"})).await.unwrap();
    finish_by_hand(&pool, b).await;
    let wait = spawn_wait(&jobs, &[a, b], Duration::from_secs(10));
    until_waiting(&jobs, 1).await;
    finish_by_hand(&pool, a).await;
    let rows = done_rows(wait.await.unwrap().0.unwrap());
    assert_eq!(
        rows.iter().map(|row| row.id).collect::<Vec<_>>(),
        vec![a, b]
    );
    listening.close().await;
}

#[sqlx::test]
async fn waiting_for_an_unknown_job_is_an_error(pool: PgPool) {
    let listening = listening(&pool, 64).await;
    let jobs = listening.jobs.clone();
    let known = insert::<Noop>(&pool, &json!({})).await.unwrap();
    let error = jobs
        .wait(&[known, JobId(999_999)], Duration::from_secs(1))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, Error::NotFound(words) if words.contains("999999")),
        "{error}"
    );
    assert_eq!(error.to_string(), "no job has the id 999999");
    listening.close().await;
}

#[sqlx::test]
async fn with_every_slot_taken_the_next_caller_gets_a_receipt_at_once_and_a_freed_slot_serves_again(
    pool: PgPool,
) {
    let listening = listening(&pool, 64).await;
    let jobs = listening.jobs.clone();
    let mut ids = Vec::new();
    let mut waits = Vec::new();
    for _ in 0..64 {
        let id = insert::<Noop>(&pool, &json!({})).await.unwrap();
        ids.push(id);
        waits.push(spawn_wait(&jobs, &[id], Duration::from_secs(60)));
    }
    until_waiting(&jobs, 64).await;

    // The 65th: a receipt at once, and without the database (this pool is closed, so
    // any query would fail and the wait would run to its limit instead).
    let closed = PgPool::connect_lazy_with((*pool.connect_options()).clone());
    closed.close().await;
    let extra = insert::<Noop>(&pool, &json!({})).await.unwrap();
    let started = Instant::now();
    let outcome = jobs
        .on_pool(closed.clone())
        .wait(&[extra], Duration::from_secs(30))
        .await
        .unwrap();
    assert!(matches!(outcome, WaitOutcome::Receipt));
    // At once: far below the 30 s that any other way to a receipt takes here (was:
    // within 50 ms, which a loaded machine does not always keep).
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "at once: {:?}",
        started.elapsed()
    );

    // One finishes: its waiter is answered and its slot freed for a new caller.
    finish_by_hand(&pool, ids[0]).await;
    let first = waits.remove(0).await.unwrap().0.unwrap();
    assert_eq!(done_rows(first)[0].id, ids[0]);
    until_waiting(&jobs, 63).await;
    finish_by_hand(&pool, extra).await;
    let rows = done_rows(jobs.wait(&[extra], Duration::from_secs(5)).await.unwrap());
    assert_eq!(rows[0].id, extra);

    for id in &ids[1..] {
        finish_by_hand(&pool, *id).await;
    }
    for wait in waits {
        assert!(matches!(
            wait.await.unwrap().0.unwrap(),
            WaitOutcome::Done(_)
        ));
    }
    listening.close().await;
}

#[sqlx::test]
async fn a_caller_that_goes_away_frees_its_slot(pool: PgPool) {
    let listening = listening(&pool, 1).await;
    let jobs = listening.jobs.clone();
    let id = insert::<Noop>(&pool, &json!({})).await.unwrap();
    let wait = spawn_wait(&jobs, &[id], Duration::from_secs(60));
    until_waiting(&jobs, 1).await;
    wait.abort();
    until_waiting(&jobs, 0).await;
    assert!(jobs.waited_ids().is_empty(), "its registration is gone too");
    finish_by_hand(&pool, id).await;
    assert!(matches!(
        jobs.wait(&[id], Duration::from_secs(5)).await.unwrap(),
        WaitOutcome::Done(_)
    ));
    listening.close().await;
}

#[sqlx::test]
async fn a_waiter_told_its_job_finished_reads_again_after_its_read_meets_a_broken_connection(
    pool: PgPool,
) {
    // The waiter's pool hands out its one connection without testing it, as a pool
    // does that still holds connections to a primary that just failed over.
    let waiter_pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .test_before_acquire(false)
        .connect_with((*pool.connect_options()).clone())
        .await
        .unwrap();
    let its_backend: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&waiter_pool)
        .await
        .unwrap();
    let jobs = JobClient::new(waiter_pool.clone(), 8);
    let listening = jobs.listen_at((*pool.connect_options()).clone());
    wait_until(Duration::from_secs(10), || async {
        jobs.listener_connected()
    })
    .await;
    let id = insert::<Noop>(&pool, &json!({})).await.unwrap();
    let limit = Duration::from_secs(10);
    let wait = spawn_wait(&jobs, &[id], limit);
    until_waiting(&jobs, 1).await;
    // The wait's first look at the job is over: the connection sits idle in the pool.
    wait_until(Duration::from_secs(10), || async {
        sqlx::query_scalar::<_, bool>(
            "SELECT state = 'idle' AND query NOT LIKE '%pg_backend_pid%'
             FROM pg_stat_activity WHERE pid = $1",
        )
        .bind(its_backend)
        .fetch_one(&pool)
        .await
        .unwrap()
    })
    .await;

    // The connection breaks under the pool (its server process ends, as on a crash).
    let ended: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1, 5000)")
        .bind(its_backend)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(ended, "the waiter pool's connection ended");
    finish_by_hand(&pool, id).await;

    // Told by the notification, the waiter reads the job: its first read fails on the
    // broken connection, and a receipt would be an answer lost for a finished job.
    let (outcome, took) = wait.await.unwrap();
    let rows = done_rows(outcome.unwrap());
    assert_eq!(rows[0].state, JobState::Completed);
    assert!(took < limit, "answered before the limit: {took:?}");
    listening.stop().await;
}

#[sqlx::test]
async fn a_killed_listener_backend_costs_no_answer(pool: PgPool) {
    let listening = listening(&pool, 64).await;
    let jobs = listening.jobs.clone();
    let id = insert::<Noop>(&pool, &json!({})).await.unwrap();
    let limit = Duration::from_secs(5);
    let wait = spawn_wait(&jobs, &[id], limit);
    until_waiting(&jobs, 1).await;

    let killed: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE application_name = 'standmeet-listener' AND datname = current_database()",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(killed, vec![true], "exactly one listener connection");
    // Finished while the listener is down: its notification is lost.
    finish_by_hand(&pool, id).await;

    let (outcome, took) = wait.await.unwrap();
    assert!(matches!(outcome.unwrap(), WaitOutcome::Done(_)));
    assert!(took < limit, "answered before the limit: {took:?}");
    wait_until(Duration::from_secs(10), || async {
        jobs.listener_connected()
    })
    .await;
    listening.close().await;
}

#[sqlx::test]
async fn the_listen_connection_goes_where_it_is_told(pool: PgPool) {
    // A listen URL of its own (behind a transaction-pooling PgBouncer, a direct one):
    // here the same server as another role, so pg_stat_activity shows which was used.
    let role = format!("listener_{}", std::process::id());
    sqlx::query(&format!("CREATE ROLE {role} LOGIN PASSWORD 'listen-here'"))
        .execute(&pool)
        .await
        .unwrap();
    let direct = (*pool.connect_options())
        .clone()
        .username(&role)
        .password("listen-here");
    let jobs = JobClient::new(pool.clone(), 8);
    let listening = jobs.listen_at(direct);
    wait_until(Duration::from_secs(10), || async {
        jobs.listener_connected()
    })
    .await;
    let listener_role: String = sqlx::query_scalar(
        "SELECT usename::text FROM pg_stat_activity
         WHERE application_name = 'standmeet-listener' AND datname = current_database()",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(listener_role, role);
    // And it is the one that wakes waiters.
    let id = insert::<Noop>(&pool, &json!({})).await.unwrap();
    let waiter = spawn_wait(&jobs, &[id], Duration::from_secs(5));
    until_waiting(&jobs, 1).await;
    finish_by_hand(&pool, id).await;
    let (outcome, _) = waiter.await.unwrap();
    assert!(matches!(outcome, Ok(WaitOutcome::Done(_))), "{outcome:?}");
    listening.stop().await;
    sqlx::query(&format!("DROP ROLE {role}"))
        .execute(&pool)
        .await
        .ok();
}
