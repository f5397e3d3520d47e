//! The job engine on a real database: every transition a job can take, fencing,
//! cancellation, retries, rescue, cleanup, graceful shutdown, and exactly-once runs
//! across engine instances.

mod common;

use std::time::Duration;

use common::jobs::{
    Actions, Counted, Flaky, FlakyArgs, Panics, RunCounts, Slow, client, insert, insert_with, job,
    quick_config, start_engine, test_registry, wait_for_state, wait_until,
};
use serde_json::json;
use sqlx::PgPool;
use standmeet_jobs::builtin::{Noop, Sleep, SleepArgs};
use standmeet_jobs::testing::{self, Outcome, OutputJson};
use standmeet_jobs::{CancelOutcome, RetryOutcome};
use standmeet_jobs::{InsertOptions, JobId, JobState};

fn registry() -> standmeet_jobs::Registry {
    test_registry(RunCounts::default())
}

fn all_kinds() -> Vec<String> {
    registry().kinds().map(str::to_string).collect()
}

#[sqlx::test]
async fn an_insert_inside_a_rolled_back_transaction_leaves_no_job(pool: PgPool) {
    let mut tx = pool.begin().await.unwrap();
    let id = client(&pool)
        .insert_tx::<Noop>(&mut tx, &json!({"n": 1}))
        .await
        .unwrap();
    assert!(
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM jobs WHERE id = $1")
            .bind(id.0)
            .fetch_one(&mut *tx)
            .await
            .unwrap()
            == 1,
        "visible inside"
    );
    tx.rollback().await.unwrap();
    assert!(
        client(&pool).get(id).await.unwrap().is_none(),
        "gone with the rollback"
    );
    let count = common::count(&pool, "SELECT count(*) FROM jobs").await;
    assert_eq!(count, 0);
}

#[sqlx::test]
async fn an_insert_commits_with_the_callers_transaction(pool: PgPool) {
    let mut tx = pool.begin().await.unwrap();
    let id = client(&pool)
        .insert_tx::<Noop>(&mut tx, &json!({"n": 1}))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let row = job(&pool, id).await;
    assert_eq!(row.state, JobState::Available);
    assert_eq!(row.kind, "system.noop");
    assert_eq!(row.queue, "default");
    assert_eq!(row.attempt, 0);
    assert_eq!(row.args, json!({"n": 1}));
}

#[sqlx::test]
async fn a_batch_insert_answers_ids_in_the_order_of_its_arguments(pool: PgPool) {
    let args: Vec<serde_json::Value> = (0..50).map(|n| json!({ "n": n })).collect();
    let mut tx = pool.begin().await.unwrap();
    let ids = client(&pool)
        .insert_many_tx::<Noop>(&mut tx, &args)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(ids.len(), 50);
    for (n, id) in ids.iter().enumerate() {
        assert_eq!(job(&pool, *id).await.args, json!({ "n": n }));
    }
}

#[sqlx::test]
async fn a_noop_job_completes_with_its_args_as_output_and_no_errors(pool: PgPool) {
    let _engine = start_engine(&pool, registry(), quick_config(4)).await;
    let id = insert::<Noop>(&pool, &json!({"hello": "world"}))
        .await
        .unwrap();
    let row = wait_for_state(&pool, id, JobState::Completed).await;
    assert_eq!(row.output, Some(json!({"hello": "world"})));
    assert_eq!(row.attempt, 1);
    assert!(row.finalized_at.is_some());
    assert!(row.attempted_at.is_some());
    assert!(row.attempt_errors().is_empty());
    assert_eq!(row.attempted_by, None, "released by its worker");
}

/// Every change of a job's state, as the database saw it, in order.
async fn record_transitions(pool: &PgPool) {
    sqlx::raw_sql(
        "CREATE TABLE transitions (n bigserial, job bigint, old job_state, new job_state);
         CREATE FUNCTION note_transition() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
           INSERT INTO transitions (job, old, new) VALUES (NEW.id, OLD.state, NEW.state);
           RETURN NULL;
         END $$;
         CREATE TRIGGER note_transition AFTER UPDATE OF state ON jobs
           FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state)
           EXECUTE FUNCTION note_transition();",
    )
    .execute(pool)
    .await
    .unwrap();
}

async fn transitions_of(pool: &PgPool, id: JobId) -> Vec<(String, String)> {
    sqlx::query_as("SELECT old::text, new::text FROM transitions WHERE job = $1 ORDER BY n")
        .bind(id.0)
        .fetch_all(pool)
        .await
        .unwrap()
}

#[sqlx::test]
async fn a_quick_job_is_written_once_and_a_slow_one_is_running_first(pool: PgPool) {
    record_transitions(&pool).await;
    // A window far longer than 20 no-ops take on a busy machine, and shorter than the
    // slow job.
    let config = standmeet_jobs::EngineConfig {
        claim_window: Duration::from_millis(1_000),
        ..quick_config(8)
    };
    let _engine = start_engine(&pool, registry(), config).await;
    // Outlasts any claim's window: running, then completed. (The queue is idle, so it
    // is taken by the one-call claim, `running` at once; the next ones find the queue
    // busy and go in a claim.)
    let slow = insert::<Sleep>(&pool, &SleepArgs { ms: 1_500 })
        .await
        .unwrap();
    wait_for_state(&pool, slow, JobState::Running).await;
    // Ends inside its claim: from available straight to completed, one write.
    let quick: Vec<JobId> = {
        let mut tx = pool.begin().await.unwrap();
        let mut ids = Vec::new();
        for n in 0..20 {
            ids.push(
                client(&pool)
                    .insert_tx::<Noop>(&mut tx, &json!({ "n": n }))
                    .await
                    .unwrap(),
            );
        }
        tx.commit().await.unwrap();
        ids
    };
    for id in &quick {
        let row = wait_for_state(&pool, *id, JobState::Completed).await;
        assert_eq!(row.attempt, 1, "{row:?}");
        assert_eq!(
            transitions_of(&pool, *id).await,
            vec![("available".to_string(), "completed".to_string())]
        );
    }
    let row = wait_for_state(&pool, slow, JobState::Completed).await;
    assert_eq!(row.attempt, 1, "{row:?}");
    assert_eq!(
        transitions_of(&pool, slow).await,
        vec![
            ("available".to_string(), "running".to_string()),
            ("running".to_string(), "completed".to_string())
        ]
    );
}

#[sqlx::test]
async fn a_job_inserted_by_plain_sql_is_picked_up_at_once(pool: PgPool) {
    // The default queue polls only every 10 s here: pickup within the wait below
    // comes from the insert notification.
    let _engine = start_engine(&pool, registry(), quick_config(4)).await;
    let started = std::time::Instant::now();
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO jobs (kind, args) VALUES ('system.noop', '{\"by\": \"sql\"}') RETURNING id",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    let row = wait_for_state(&pool, JobId(id), JobState::Completed).await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(row.output, Some(json!({"by": "sql"})));
}

#[sqlx::test]
async fn work_nobody_announced_is_found_at_the_poll_interval_while_attempts_keep_ending(
    pool: PgPool,
) {
    // A busy queue looks for work only when told, after a full fetch, or at its poll
    // interval counted from its last look: attempts that keep ending must not put the
    // poll off. The job below becomes available with no notification (a lock let go,
    // as when another process's claim rolls back).
    let silent = insert::<Noop>(&pool, &json!({"silent": true}))
        .await
        .unwrap();
    let mut lock = pool.begin().await.unwrap();
    sqlx::query("SELECT id FROM jobs WHERE id = $1 FOR UPDATE")
        .bind(silent.0)
        .execute(&mut *lock)
        .await
        .unwrap();
    let mut config = quick_config(32);
    config.queues = vec![standmeet_jobs::QueueConfig::new(
        "default",
        32,
        Duration::from_secs(1),
    )];
    let engine = start_engine(&pool, registry(), config).await;
    // Sixteen attempts ending one every 250 ms, from 1.25 s to 5 s after they start,
    // inserted at once (one by one on a busy machine, the first ended before the last
    // started).
    let sleepers: Vec<SleepArgs> = (1..=16)
        .map(|n| SleepArgs {
            ms: 1_000 + 250 * n,
        })
        .collect();
    let mut tx = pool.begin().await.unwrap();
    client(&pool)
        .insert_many_tx::<Sleep>(&mut tx, &sleepers)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    wait_until(Duration::from_secs(10), || async {
        common::count(
            &pool,
            "SELECT count(*) FROM jobs WHERE kind = 'system.sleep' AND attempt >= 1",
        )
        .await
            == 16
    })
    .await;
    lock.commit().await.unwrap();
    let let_go = std::time::Instant::now();
    wait_for_state(&pool, silent, JobState::Completed).await;
    // At the poll interval after the last look (about 1 s); an attempt's end must not
    // have put it off until the last one ended (4 s), nor past it.
    assert!(
        let_go.elapsed() < Duration::from_millis(3_000),
        "found after {:?}",
        let_go.elapsed()
    );
    let running = common::count(&pool, "SELECT count(*) FROM jobs WHERE state = 'running'").await;
    assert!(
        running > 0,
        "the queue was still busy when the job was found"
    );
    drop(engine);
}

#[sqlx::test]
async fn a_failing_job_is_retried_with_its_errors_kept_and_then_completes(pool: PgPool) {
    let _engine = start_engine(&pool, registry(), quick_config(4)).await;
    let id = insert::<Flaky>(&pool, &FlakyArgs { succeed_on: 3 })
        .await
        .unwrap();
    let row = wait_for_state(&pool, id, JobState::Completed).await;
    assert_eq!(row.attempt, 3);
    assert_eq!(row.output, Some(json!({"attempt": 3})));
    let errors = row.attempt_errors();
    assert_eq!(errors.len(), 2);
    assert_eq!(errors[0].attempt, 1);
    assert_eq!(errors[0].error, "attempt 1 failed on purpose");
    assert_eq!(errors[1].attempt, 2);
    assert!(errors[0].at <= errors[1].at);
}

#[sqlx::test]
async fn a_job_out_of_attempts_is_discarded_with_one_error_per_attempt(pool: PgPool) {
    let _engine = start_engine(&pool, registry(), quick_config(4)).await;
    let id = insert::<Flaky>(&pool, &FlakyArgs { succeed_on: 99 })
        .await
        .unwrap();
    let row = wait_for_state(&pool, id, JobState::Discarded).await;
    assert_eq!(row.attempt, 3);
    assert_eq!(row.max_attempts, 3);
    let attempts: Vec<i16> = row.attempt_errors().iter().map(|e| e.attempt).collect();
    assert_eq!(attempts, vec![1, 2, 3]);
    assert!(row.finalized_at.is_some());
}

#[sqlx::test]
async fn unreadable_args_are_discarded_without_retrying_and_an_unknown_kind_waits(pool: PgPool) {
    let _engine = start_engine(&pool, registry(), quick_config(4)).await;
    let unknown: i64 = sqlx::query_scalar(
        "INSERT INTO jobs (kind, args) VALUES ('nobody.knows', '{}') RETURNING id",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    let bad_args: i64 =
        sqlx::query_scalar("INSERT INTO jobs (kind, args) VALUES ('test.flaky', '{\"succeed_on\": \"soon\"}') RETURNING id")
            .fetch_one(&pool)
            .await
            .unwrap();

    let row = wait_for_state(&pool, JobId(bad_args), JobState::Discarded).await;
    assert_eq!(row.attempt, 1, "no retry loop");
    assert!(
        row.attempt_errors()[0]
            .error
            .contains("the arguments do not fit a test.flaky job"),
        "{row:?}"
    );
    // A kind this process has no handler for is left to a process that has one (a
    // newer version during a rolling deploy): never taken, never discarded.
    let after = insert::<Noop>(&pool, &json!({})).await.unwrap();
    wait_for_state(&pool, after, JobState::Completed).await;
    let row = job(&pool, JobId(unknown)).await;
    assert_eq!(
        (row.state, row.attempt),
        (JobState::Available, 0),
        "{row:?}"
    );
}

#[sqlx::test]
async fn a_panicking_handler_becomes_an_error_entry_and_the_worker_goes_on(pool: PgPool) {
    let _engine = start_engine(&pool, registry(), quick_config(1)).await;
    let id = insert::<Panics>(&pool, &json!({"until": 2})).await.unwrap();
    let row = wait_for_state(&pool, id, JobState::Completed).await;
    let errors = row.attempt_errors();
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0]
            .error
            .contains("the handler panicked: boom on attempt 1"),
        "{errors:?}"
    );
    // The one worker is still there for the next job.
    let next = insert::<Noop>(&pool, &json!({})).await.unwrap();
    wait_for_state(&pool, next, JobState::Completed).await;
}

#[sqlx::test]
async fn an_attempt_past_its_timeout_is_stopped_and_counted_as_failed(pool: PgPool) {
    let _engine = start_engine(&pool, registry(), quick_config(1)).await;
    let id = insert::<Slow>(&pool, &json!({})).await.unwrap();
    let row = wait_for_state(&pool, id, JobState::Discarded).await;
    assert!(
        row.attempt_errors()[0]
            .error
            .contains("timed out after 200ms"),
        "{row:?}"
    );
}

#[sqlx::test]
async fn a_handler_can_discard_cancel_or_snooze(pool: PgPool) {
    let _engine = start_engine(&pool, registry(), quick_config(4)).await;
    let discard = insert::<Actions>(&pool, &json!({"action": "discard"}))
        .await
        .unwrap();
    let cancel = insert::<Actions>(&pool, &json!({"action": "cancel"}))
        .await
        .unwrap();
    let snooze = insert::<Actions>(&pool, &json!({"action": "snooze"}))
        .await
        .unwrap();
    // Far more snoozes than attempts: none of them counts.
    let snoozes_a_lot = insert::<Actions>(&pool, &json!({"action": "snooze", "snoozes": 40}))
        .await
        .unwrap();

    let row = wait_for_state(&pool, discard, JobState::Discarded).await;
    assert_eq!(row.attempt, 1);
    assert_eq!(row.attempt_errors()[0].error, "cannot ever work");

    let row = wait_for_state(&pool, cancel, JobState::Cancelled).await;
    assert_eq!(row.attempt_errors()[0].error, "not wanted any more");

    let row = wait_for_state(&pool, snooze, JobState::Completed).await;
    assert_eq!(row.attempt, 1, "the snoozed attempt gave its number back");
    assert_eq!(row.max_attempts, 25, "a snooze changes no limit");
    assert!(row.attempt_errors().is_empty(), "a snooze is not a failure");
    let row = wait_for_state(&pool, snoozes_a_lot, JobState::Completed).await;
    assert_eq!((row.attempt, row.max_attempts), (1, 25));
}

#[sqlx::test]
async fn a_job_scheduled_for_later_waits_then_runs(pool: PgPool) {
    let _engine = start_engine(&pool, registry(), quick_config(4)).await;
    let at = time::OffsetDateTime::now_utc() + Duration::from_millis(300);
    // Read back inside the inserting transaction, where the scheduler cannot get at it
    // yet, so the check does not race the clock on a busy machine.
    let mut tx = pool.begin().await.unwrap();
    let id = client(&pool)
        .insert_tx_with::<Noop>(
            &mut tx,
            &json!({}),
            InsertOptions {
                scheduled_at: Some(at),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        sqlx::query_scalar::<_, JobState>("SELECT state FROM jobs WHERE id = $1")
            .bind(id.0)
            .fetch_one(&mut *tx)
            .await
            .unwrap(),
        JobState::Scheduled
    );
    tx.commit().await.unwrap();
    let row = wait_for_state(&pool, id, JobState::Completed).await;
    assert!(row.attempted_at.unwrap() >= at, "not run before its time");
}

#[sqlx::test]
async fn cancelling_a_job_that_has_not_run_finishes_it_at_once(pool: PgPool) {
    let at = time::OffsetDateTime::now_utc() + Duration::from_secs(3600);
    let scheduled = insert_with::<Noop>(
        &pool,
        &json!({}),
        InsertOptions {
            scheduled_at: Some(at),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let available = insert::<Noop>(&pool, &json!({})).await.unwrap();
    for id in [scheduled, available] {
        assert_eq!(
            client(&pool).cancel(id).await.unwrap(),
            CancelOutcome::Cancelled
        );
        let row = job(&pool, id).await;
        assert_eq!(row.state, JobState::Cancelled);
        assert!(row.finalized_at.is_some());
        assert_eq!(
            client(&pool).cancel(id).await.unwrap(),
            CancelOutcome::AlreadyFinal(JobState::Cancelled)
        );
    }
    assert_eq!(
        client(&pool).cancel(JobId(987_654)).await.unwrap(),
        CancelOutcome::NotFound
    );
}

#[sqlx::test]
async fn cancelling_a_running_job_fires_its_cancellation_and_ends_it_cancelled(pool: PgPool) {
    let engine = start_engine(&pool, registry(), quick_config(4)).await;
    let id = insert::<Sleep>(&pool, &SleepArgs { ms: 60_000 })
        .await
        .unwrap();
    wait_for_state(&pool, id, JobState::Running).await;
    wait_until(Duration::from_secs(5), || async {
        engine.running_here() == 1
    })
    .await;
    assert_eq!(
        client(&pool).cancel(id).await.unwrap(),
        CancelOutcome::Requested
    );
    let row = wait_for_state(&pool, id, JobState::Cancelled).await;
    assert!(
        row.attempt_errors()[0].error.contains("cancelled"),
        "{row:?}"
    );
}

#[sqlx::test]
async fn an_admin_retry_brings_a_finished_job_back_with_room_for_one_more_attempt(pool: PgPool) {
    let _engine = start_engine(&pool, registry(), quick_config(4)).await;
    let id = insert_with::<Flaky>(
        &pool,
        &FlakyArgs { succeed_on: 2 },
        InsertOptions {
            max_attempts: Some(1),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    wait_for_state(&pool, id, JobState::Discarded).await;
    assert_eq!(
        client(&pool).retry(id).await.unwrap(),
        RetryOutcome::Retried
    );
    let row = wait_for_state(&pool, id, JobState::Completed).await;
    assert_eq!(row.attempt, 2);
    assert_eq!(row.max_attempts, 2);
    assert_eq!(
        client(&pool).retry(id).await.unwrap(),
        RetryOutcome::NotRetryable(JobState::Completed)
    );
    assert_eq!(
        client(&pool).retry(JobId(424_242)).await.unwrap(),
        RetryOutcome::NotFound
    );
}

/// Takes a job as a worker would (running, attempt 1, leased to "ghost").
async fn take_as_ghost(pool: &PgPool) -> JobId {
    let id = insert::<Noop>(pool, &json!({})).await.unwrap();
    let taken = testing::claim_as_ghost(
        pool,
        "default",
        10,
        &all_kinds(),
        "ghost",
        Duration::from_secs(60),
    )
    .await
    .unwrap();
    assert_eq!(taken, vec![id]);
    let row = job(pool, id).await;
    assert_eq!((row.state, row.attempt), (JobState::Running, 1));
    id
}

fn completion(id: JobId, attempt: i16) -> Outcome {
    Outcome {
        id,
        attempt,
        max_attempts: 25,
        state: JobState::Completed,
        output: Some(OutputJson::of(&json!({"late": true})).unwrap()),
        error: None,
        delay: None,
        give_back_attempt: false,
    }
}

#[sqlx::test]
async fn the_rescuer_takes_back_a_job_whose_lease_ran_out_and_a_late_completion_changes_nothing(
    pool: PgPool,
) {
    let id = take_as_ghost(&pool).await;
    // Not yet: the lease runs.
    assert_eq!(
        testing::job_rescue_expired(&pool, 100, Duration::from_millis(10))
            .await
            .unwrap(),
        0
    );
    sqlx::query("UPDATE jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1")
        .bind(id.0)
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(
        testing::job_rescue_expired(&pool, 100, Duration::from_millis(10))
            .await
            .unwrap(),
        1
    );
    let row = job(&pool, id).await;
    assert_eq!(row.state, JobState::Retryable);
    assert!(
        row.attempt_errors()[0]
            .error
            .starts_with("worker lost: ghost"),
        "{row:?}"
    );
    assert_eq!(row.attempted_by, None);

    // The ghost comes back and tries to complete: fenced out.
    let changed = testing::job_record_outcomes(&pool, "ghost", &[completion(id, 1)], &[])
        .await
        .unwrap();
    assert!(changed.is_empty());
    let after = job(&pool, id).await;
    assert_eq!(after.state, JobState::Retryable);
    assert_eq!(after.output, None);
}

#[sqlx::test]
async fn the_rescuer_discards_a_lost_job_out_of_attempts_and_cancels_one_an_admin_cancelled(
    pool: PgPool,
) {
    let out_of_attempts = take_as_ghost(&pool).await;
    sqlx::query("UPDATE jobs SET max_attempts = 1 WHERE id = $1")
        .bind(out_of_attempts.0)
        .execute(&pool)
        .await
        .unwrap();
    let cancel_asked = take_as_ghost(&pool).await;
    assert_eq!(
        client(&pool).cancel(cancel_asked).await.unwrap(),
        CancelOutcome::Requested
    );
    sqlx::query("UPDATE jobs SET lease_expires_at = now() - interval '1 second'")
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(
        testing::job_rescue_expired(&pool, 100, Duration::from_millis(10))
            .await
            .unwrap(),
        2
    );
    assert_eq!(job(&pool, out_of_attempts).await.state, JobState::Discarded);
    assert_eq!(job(&pool, cancel_asked).await.state, JobState::Cancelled);
}

#[sqlx::test]
async fn a_late_completion_after_a_cancel_changes_nothing(pool: PgPool) {
    let id = take_as_ghost(&pool).await;
    // An operator (or the rescuer of a cancel request) finishes it meanwhile.
    sqlx::query("UPDATE jobs SET state = 'cancelled' WHERE id = $1")
        .bind(id.0)
        .execute(&pool)
        .await
        .unwrap();
    let row = job(&pool, id).await;
    assert!(
        row.finalized_at.is_some(),
        "finalized_at is filled in for the operator"
    );
    let changed = testing::job_record_outcomes(&pool, "ghost", &[completion(id, 1)], &[])
        .await
        .unwrap();
    assert!(changed.is_empty());
    assert_eq!(job(&pool, id).await.state, JobState::Cancelled);

    // A completion for a later attempt than the one running is fenced out too.
    let other = take_as_ghost(&pool).await;
    assert!(
        testing::job_record_outcomes(&pool, "ghost", &[completion(other, 2)], &[])
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        testing::job_record_outcomes(&pool, "ghost", &[completion(other, 1)], &[])
            .await
            .unwrap()
            .iter()
            .map(|job| job.id)
            .collect::<Vec<_>>(),
        vec![other]
    );
    assert_eq!(job(&pool, other).await.output, Some(json!({"late": true})));
}

#[sqlx::test]
async fn complete_tx_commits_the_business_write_and_the_completion_together(pool: PgPool) {
    use standmeet_jobs::{JobContext, JobError, JobKind};
    sqlx::query("CREATE TABLE effects (job_id bigint PRIMARY KEY)")
        .execute(&pool)
        .await
        .unwrap();

    struct Business;
    impl JobKind for Business {
        const KIND: &'static str = "test.business";
        type Args = serde_json::Value;
        type Output = ();
        async fn run(&self, job: JobContext, args: serde_json::Value) -> Result<(), JobError> {
            let mut tx = job.pool().begin().await?;
            sqlx::query("INSERT INTO effects VALUES ($1)")
                .bind(job.id.0)
                .execute(&mut *tx)
                .await?;
            if args["wait_for_cancel"].as_bool() == Some(true) {
                // An admin cancels while we work: our completion is fenced out and the
                // business write rolls back with it.
                job.cancelled().await;
            }
            job.complete_tx(&mut tx, &json!({"done": true})).await?;
            tx.commit().await?;
            Ok(())
        }
    }

    let engine = start_engine(
        &pool,
        standmeet_jobs::Registry::new().register(Business),
        quick_config(2),
    )
    .await;
    let done = insert::<Business>(&pool, &json!({})).await.unwrap();
    let row = wait_for_state(&pool, done, JobState::Completed).await;
    assert_eq!(row.output, Some(json!({"done": true})));
    let effects: i64 = sqlx::query_scalar("SELECT count(*) FROM effects WHERE job_id = $1")
        .bind(done.0)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(effects, 1);

    let cancelled = insert::<Business>(&pool, &json!({"wait_for_cancel": true}))
        .await
        .unwrap();
    wait_for_state(&pool, cancelled, JobState::Running).await;
    // Move it out of `running` the way an operator would, then fire the handler's
    // cancellation: complete_tx must refuse.
    sqlx::query("UPDATE jobs SET state = 'cancelled' WHERE id = $1")
        .bind(cancelled.0)
        .execute(&pool)
        .await
        .unwrap();
    // What an admin's cancel sends to the job's holder.
    sqlx::query("SELECT pg_notify('standmeet_job_cancel', $1)")
        .bind(cancelled.0.to_string())
        .execute(&pool)
        .await
        .unwrap();
    wait_until(Duration::from_secs(5), || async {
        engine.running_here() == 0
    })
    .await;
    let effects: i64 = sqlx::query_scalar("SELECT count(*) FROM effects WHERE job_id = $1")
        .bind(cancelled.0)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(
        effects, 0,
        "the business write rolled back with the fenced completion"
    );
    assert_eq!(job(&pool, cancelled).await.state, JobState::Cancelled);
}

#[sqlx::test]
async fn the_cleaner_deletes_finished_jobs_past_their_retention_only(pool: PgPool) {
    let mut ids = Vec::new();
    for state in ["completed", "cancelled", "discarded"] {
        for age_hours in [1, 30, 200] {
            let id: i64 = sqlx::query_scalar(
                "INSERT INTO jobs (kind, state, finalized_at) VALUES ('system.noop', $1::job_state, now() - $2 * interval '1 hour') RETURNING id",
            )
            .bind(state)
            .bind(age_hours as f64)
            .fetch_one(&pool)
            .await
            .unwrap();
            ids.push((state, age_hours, id));
        }
    }
    let pending = insert::<Noop>(&pool, &json!({})).await.unwrap();
    let deleted = testing::clean_finished(
        &pool,
        Duration::from_secs(24 * 3600),
        Duration::from_secs(7 * 24 * 3600),
    )
    .await
    .unwrap();
    assert_eq!(deleted, 5);
    for (state, age_hours, id) in ids {
        let kept = client(&pool).get(JobId(id)).await.unwrap().is_some();
        let expected = match state {
            "discarded" => age_hours < 168,
            _ => age_hours < 24,
        };
        assert_eq!(kept, expected, "{state}, {age_hours} h old");
    }
    assert!(client(&pool).get(pending).await.unwrap().is_some());
}

#[sqlx::test]
async fn a_graceful_shutdown_lets_short_attempts_finish_and_interrupts_long_ones_as_retryable(
    pool: PgPool,
) {
    let config = standmeet_jobs::EngineConfig {
        shutdown_grace: Duration::from_secs(2),
        ..quick_config(4)
    };
    let engine = start_engine(&pool, registry(), config).await;
    // Long enough to be seen running by a poll on a busy machine (at 200 ms a CI run
    // once saw it only completed), short enough to end within the grace.
    let short = insert::<Sleep>(&pool, &SleepArgs { ms: 1_000 })
        .await
        .unwrap();
    let long = insert::<Sleep>(&pool, &SleepArgs { ms: 60_000 })
        .await
        .unwrap();
    wait_for_state(&pool, short, JobState::Running).await;
    wait_for_state(&pool, long, JobState::Running).await;
    engine.shutdown().await;

    assert_eq!(
        job(&pool, short).await.state,
        JobState::Completed,
        "finished within the grace period"
    );
    let row = job(&pool, long).await;
    assert_eq!(
        row.state,
        JobState::Retryable,
        "interrupted, not lost: {row:?}"
    );
    assert!(
        row.attempt_errors()[0].error.contains("interrupted"),
        "{row:?}"
    );
    assert_eq!(
        (row.attempt, row.max_attempts),
        (0, 25),
        "the interruption gives its attempt back"
    );
}

#[sqlx::test]
async fn two_engines_with_two_workers_each_run_two_thousand_jobs_exactly_once(pool: PgPool) {
    let runs = RunCounts::default();
    let first = start_engine(&pool, test_registry(runs.clone()), quick_config(2)).await;
    let second = start_engine(&pool, test_registry(runs.clone()), quick_config(2)).await;
    let args: Vec<serde_json::Value> = (0..2_000).map(|n| json!({ "n": n })).collect();
    let mut tx = pool.begin().await.unwrap();
    let ids = client(&pool)
        .insert_many_tx::<Counted>(&mut tx, &args)
        .await
        .unwrap();
    tx.commit().await.unwrap();

    wait_until(Duration::from_secs(120), || async {
        let done =
            common::count(&pool, "SELECT count(*) FROM jobs WHERE state = 'completed'").await;
        done == 2_000
    })
    .await;
    // Both stopped (gracefully) before the counts are read: nothing runs after this.
    first.shutdown().await;
    second.shutdown().await;

    {
        let runs = runs.lock().unwrap();
        assert_eq!(runs.len(), 2_000);
        for id in ids {
            assert_eq!(runs.get(&id), Some(&1), "job {id} ran once");
        }
    }
    let workers: i64 = sqlx::query_scalar("SELECT count(DISTINCT attempted_by) FROM jobs")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(workers, 0, "completed jobs are released");
}

/// `config` with one claim in flight per queue, i.e. one claim slot.
fn one_claim_in_flight(config: standmeet_jobs::EngineConfig) -> standmeet_jobs::EngineConfig {
    standmeet_jobs::EngineConfig {
        queues: config
            .queues
            .iter()
            .map(|queue| queue.clone().with_claims_in_flight(1))
            .collect(),
        ..config
    }
}

/// `test.claims_open`: answers how many claims are open on the database while it runs,
/// and how many of them hold a claim slot: transactions that hold rows of `jobs`
/// locked (`FOR UPDATE`) and wait (idle) for their attempts, its own claim's among
/// them, and of those the ones holding an advisory lock (a slot). The scheduler and
/// the rescuer lock rows too, but only inside a running statement, never idle. Only
/// this test's database counts: the tests running beside it have `jobs` tables of
/// their own, made by the same migrations (and so, often, with the same OID).
struct ClaimsOpen;

impl standmeet_jobs::JobKind for ClaimsOpen {
    const KIND: &'static str = "test.claims_open";
    type Args = serde_json::Value;
    /// (claims open, of them holding a slot)
    type Output = (i64, i64);

    async fn run(
        &self,
        job: standmeet_jobs::JobContext,
        _args: serde_json::Value,
    ) -> Result<(i64, i64), standmeet_jobs::JobError> {
        sqlx::query_as(
            "SELECT count(DISTINCT l.pid),
                    count(DISTINCT l.pid) FILTER (WHERE EXISTS (
                      SELECT 1 FROM pg_locks slot
                      WHERE slot.pid = l.pid AND slot.locktype = 'advisory' AND slot.granted))
             FROM pg_locks l JOIN pg_stat_activity a USING (pid)
             WHERE l.relation = 'jobs'::regclass AND l.mode = 'RowShareLock' AND l.granted
               AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
               AND a.state = 'idle in transaction'",
        )
        .fetch_one(job.pool())
        .await
        .map_err(|err| standmeet_jobs::JobError::retry(err.to_string()))
    }
}

#[sqlx::test]
async fn claims_in_flight_are_counted_across_engines_on_one_database(pool: PgPool) {
    // Two engines, one claim in flight each: together they keep one claim open at a
    // time, so every job in a claim runs while exactly one claim is open (its own).
    // Without the slots, the two engines' claims overlap.
    let config = || standmeet_jobs::EngineConfig {
        // The claim stays open while its attempts run, however slow the machine.
        claim_window: Duration::from_secs(10),
        ..one_claim_in_flight(quick_config(8))
    };
    let first = start_engine(&pool, registry().register(ClaimsOpen), config()).await;
    let second = start_engine(&pool, registry().register(ClaimsOpen), config()).await;
    let args: Vec<serde_json::Value> = (0..300).map(|n| json!({ "n": n })).collect();
    let mut tx = pool.begin().await.unwrap();
    let ids = client(&pool)
        .insert_many_tx::<ClaimsOpen>(&mut tx, &args)
        .await
        .unwrap();
    tx.commit().await.unwrap();

    wait_until(Duration::from_secs(60), || async {
        common::count(&pool, "SELECT count(*) FROM jobs WHERE state = 'completed'").await == 300
    })
    .await;
    first.shutdown().await;
    second.shutdown().await;
    let seen: Vec<(i64, i64, i64)> = sqlx::query_as(
        "SELECT (output->>0)::bigint AS claims, (output->>1)::bigint AS in_slots, count(*)
         FROM jobs WHERE id = ANY($1) GROUP BY 1, 2 ORDER BY 1, 2",
    )
    .bind(ids.iter().map(|id| id.0).collect::<Vec<_>>())
    .fetch_all(&pool)
    .await
    .unwrap();
    let jobs_where = |holds: &dyn Fn(i64, i64) -> bool| -> i64 {
        seen.iter()
            .filter(|(claims, in_slots, _)| holds(*claims, *in_slots))
            .map(|(_, _, jobs)| jobs)
            .sum()
    };
    // Never two claims in slots at once, and never two claims open at once unless one
    // went without a slot: that is the slot's wait running out (`SLOT_WAIT`, 1 s),
    // which a machine slow enough to keep a claim of quick jobs open that long sees.
    assert_eq!(
        jobs_where(&|_, in_slots| in_slots > 1),
        0,
        "(claims open, of them in a slot, jobs): {seen:?}"
    );
    // Most jobs ran in a claim holding the slot (without the slots, none would). The
    // first jobs each engine took may have run in no claim at all: an idle queue's
    // first take is one call, `running` at once (at most two jobs per engine).
    assert!(
        jobs_where(&|_, in_slots| in_slots == 1) >= 200,
        "(claims open, of them in a slot, jobs): {seen:?}"
    );
    assert!(
        jobs_where(&|claims, _| claims == 0) <= 4,
        "(claims open, of them in a slot, jobs): {seen:?}"
    );
}

#[sqlx::test]
async fn a_claim_slot_held_elsewhere_for_too_long_does_not_stall_the_queue(pool: PgPool) {
    // Someone holds the default queue's only claim slot and never lets go (a process
    // cut off from the database keeps its locks until PostgreSQL notices).
    let mut holder = pool.acquire().await.unwrap();
    sqlx::query("SELECT pg_advisory_lock($1, 0)")
        .bind(standmeet_jobs::testing::slot_lock_key("default"))
        .execute(&mut *holder)
        .await
        .unwrap();
    let _engine = start_engine(&pool, registry(), one_claim_in_flight(quick_config(2))).await;
    // A long job keeps the queue busy, so that the next job goes in a claim (an idle
    // queue takes its first jobs in one call, without a slot).
    let busy = insert::<Sleep>(
        &pool,
        &SleepArgs {
            ms: 2 * standmeet_jobs::testing::SLOT_WAIT.as_millis() as u64 + 1_000,
        },
    )
    .await
    .unwrap();
    wait_for_state(&pool, busy, JobState::Running).await;
    let started = std::time::Instant::now();
    let id = insert::<Noop>(&pool, &json!({"n": 1})).await.unwrap();
    let row = wait_for_state(&pool, id, JobState::Completed).await;
    assert_eq!(row.attempt, 1);
    // It waited for the slot, then went ahead without it.
    assert!(
        started.elapsed() >= standmeet_jobs::testing::SLOT_WAIT,
        "done in {:?}: the slot did not hold it",
        started.elapsed()
    );
    sqlx::query("SELECT pg_advisory_unlock($1, 0)")
        .bind(standmeet_jobs::testing::slot_lock_key("default"))
        .execute(&mut *holder)
        .await
        .unwrap();
}

#[sqlx::test]
async fn a_lost_worker_s_job_is_rescued_and_run_by_a_live_engine(pool: PgPool) {
    let id = take_as_ghost(&pool).await;
    sqlx::query(
        "UPDATE jobs SET lease_expires_at = now() + interval '300 milliseconds' WHERE id = $1",
    )
    .bind(id.0)
    .execute(&pool)
    .await
    .unwrap();
    let _engine = start_engine(&pool, registry(), quick_config(2)).await;
    let row = wait_for_state(&pool, id, JobState::Completed).await;
    assert_eq!(row.attempt, 2);
    assert!(
        row.attempt_errors()[0]
            .error
            .starts_with("worker lost: ghost")
    );
}
