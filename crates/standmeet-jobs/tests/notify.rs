//! The terminal notification: every move into completed, discarded or cancelled, by
//! whatever path, sends exactly one `standmeet_job_final` with the job's id, in the
//! same transaction; a rolled-back move sends none.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::jobs::{
    Flaky, FlakyArgs, RunCounts, client, insert, insert_with, job, quick_config, start_engine,
    test_registry, wait_for_state, wait_until,
};
use common::take_as_ghost;
use serde_json::json;
use sqlx::PgPool;
use sqlx::postgres::PgListener;
use standmeet_jobs::CancelOutcome;
use standmeet_jobs::builtin::{Noop, Sleep, SleepArgs};
use standmeet_jobs::testing;
use standmeet_jobs::{InsertOptions, JobId, JobState};

#[sqlx::test]
async fn every_path_into_a_terminal_state_notifies_exactly_once_and_a_rollback_never(pool: PgPool) {
    let mut listener = PgListener::connect_with(&pool).await.unwrap();
    listener.listen("standmeet_job_final").await.unwrap();

    let engine = start_engine(&pool, test_registry(RunCounts::default()), quick_config(4)).await;
    let mut expected = Vec::new();

    // A worker completes a job.
    let completed = insert::<Noop>(&pool, &json!({})).await.unwrap();
    wait_for_state(&pool, completed, JobState::Completed).await;
    expected.push(completed);

    // A worker discards a job that ran out of attempts.
    let discarded = insert_with::<Flaky>(
        &pool,
        &FlakyArgs { succeed_on: 9 },
        InsertOptions {
            max_attempts: Some(1),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    wait_for_state(&pool, discarded, JobState::Discarded).await;
    expected.push(discarded);

    // An admin cancels a job that has not run.
    let later = time::OffsetDateTime::now_utc() + Duration::from_secs(3600);
    let not_run = insert_with::<Noop>(
        &pool,
        &json!({}),
        InsertOptions {
            scheduled_at: Some(later),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(
        client(&pool).cancel(not_run).await.unwrap(),
        CancelOutcome::Cancelled
    );
    expected.push(not_run);

    // An admin cancels a running job; its worker ends the attempt.
    let running = insert::<Sleep>(&pool, &SleepArgs { ms: 60_000 })
        .await
        .unwrap();
    wait_for_state(&pool, running, JobState::Running).await;
    wait_until(Duration::from_secs(5), || async {
        engine.running_here() == 1
    })
    .await;
    assert_eq!(
        client(&pool).cancel(running).await.unwrap(),
        CancelOutcome::Requested
    );
    wait_for_state(&pool, running, JobState::Cancelled).await;
    expected.push(running);
    // Gone (gracefully) before the paths below: no engine may run their jobs.
    engine.shutdown().await;

    // The rescuer discards a lost job that was on its last attempt.
    let lost = insert_with::<Noop>(
        &pool,
        &json!({}),
        InsertOptions {
            max_attempts: Some(1),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(take_as_ghost(&pool, "system.noop").await, 1);
    sqlx::query("UPDATE jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1")
        .bind(lost.0)
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(
        testing::job_rescue_expired(&pool, 10, Duration::from_millis(10))
            .await
            .unwrap(),
        1
    );
    assert_eq!(job(&pool, lost).await.state, JobState::Discarded);
    expected.push(lost);

    // An operator's plain SQL.
    let by_hand = insert::<Noop>(&pool, &json!({})).await.unwrap();
    sqlx::query("UPDATE jobs SET state = 'completed' WHERE id = $1")
        .bind(by_hand.0)
        .execute(&pool)
        .await
        .unwrap();
    expected.push(by_hand);

    // A move that rolls back notifies nobody.
    let rolled_back = insert::<Noop>(&pool, &json!({})).await.unwrap();
    let mut tx = pool.begin().await.unwrap();
    sqlx::query("UPDATE jobs SET state = 'discarded' WHERE id = $1")
        .bind(rolled_back.0)
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    assert_eq!(job(&pool, rolled_back).await.state, JobState::Available);

    // A move whose statement fails after the notifying trigger ran (it runs before the
    // row is written; here a CHECK then refuses the row), in a savepoint rolled back
    // inside a transaction that commits: nobody hears of it.
    let refused = insert::<Noop>(&pool, &json!({})).await.unwrap();
    let mut tx = pool.begin().await.unwrap();
    sqlx::query("SAVEPOINT before_the_move")
        .execute(&mut *tx)
        .await
        .unwrap();
    let failed = sqlx::query("UPDATE jobs SET state = 'completed', errors = '{}' WHERE id = $1")
        .bind(refused.0)
        .execute(&mut *tx)
        .await;
    assert!(failed.is_err(), "errors must be an array");
    sqlx::query("ROLLBACK TO SAVEPOINT before_the_move")
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(job(&pool, refused).await.state, JobState::Available);

    // An update that leaves a terminal job terminal does not notify again.
    sqlx::query("UPDATE jobs SET state = 'cancelled' WHERE id = $1")
        .bind(by_hand.0)
        .execute(&pool)
        .await
        .unwrap();

    // Notifications arrive in commit order: once this marker is here, everything sent
    // before it is too.
    sqlx::query("SELECT pg_notify('standmeet_job_final', 'end')")
        .execute(&pool)
        .await
        .unwrap();
    let mut received: HashMap<i64, usize> = HashMap::new();
    loop {
        let notification = tokio::time::timeout(Duration::from_secs(10), listener.recv())
            .await
            .expect("the marker arrives")
            .unwrap();
        if notification.payload() == "end" {
            break;
        }
        *received
            .entry(notification.payload().parse().unwrap())
            .or_default() += 1;
    }
    let expected: HashMap<i64, usize> = expected.iter().map(|JobId(id)| (*id, 1)).collect();
    assert_eq!(received, expected);
}

#[sqlx::test]
async fn a_job_inserted_already_finished_notifies_too(pool: PgPool) {
    let mut listener = PgListener::connect_with(&pool).await.unwrap();
    listener.listen("standmeet_job_final").await.unwrap();
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO jobs (kind, state) VALUES ('system.noop', 'completed') RETURNING id",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    let notification = tokio::time::timeout(Duration::from_secs(10), listener.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(notification.payload(), id.to_string());
}
