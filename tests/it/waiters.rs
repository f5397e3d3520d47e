//! Waiting for jobs across a PostgreSQL restart: no answer lost, every wait answered
//! or given a receipt in time, and later waits work. (The waiters' other promises are
//! tested with the engine, in `crates/standmeet-jobs/tests/waiters.rs`.)

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use crate::common::jobs::insert;
use common::jobs::{finish_by_hand, spawn_wait, until_waiting, wait_until};
use serde_json::json;
use standmeet_jobs::builtin::Noop;
use standmeet_jobs::{JobClient, WaitOutcome};

#[tokio::test]
async fn a_postgres_restart_while_64_wait_answers_or_receipts_each_in_time_and_later_waits_work() {
    let scratch = tempfile::Builder::new()
        .prefix("standmeet-restart")
        .tempdir()
        .unwrap();
    std::fs::set_permissions(scratch.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let root = scratch.path().join("pg");
    let cluster = tokio::task::spawn_blocking(move || standmeet::db::PrivateCluster::start(&root))
        .await
        .unwrap()
        .unwrap();
    let pool = standmeet::db::connect(&cluster.database_url("restart"))
        .await
        .unwrap();
    standmeet::db::migrate(&pool).await.unwrap();
    let jobs = JobClient::new(pool.clone(), 64);
    let listening = jobs.listen();
    wait_until(Duration::from_secs(10), || async {
        jobs.listener_connected()
    })
    .await;

    let limit = Duration::from_secs(3);
    let mut ids = Vec::new();
    let mut waits = Vec::new();
    for _ in 0..64 {
        let id = insert::<Noop>(&pool, &json!({})).await.unwrap();
        ids.push(id);
        waits.push(spawn_wait(&jobs, &[id], limit));
    }
    until_waiting(&jobs, 64).await;

    let cluster = tokio::task::spawn_blocking(move || {
        cluster.restart().unwrap();
        cluster
    })
    .await
    .unwrap();
    // Half of the jobs finish after the restart; the others never do.
    for id in ids.iter().step_by(2) {
        finish_by_hand(&pool, *id).await;
    }

    let mut answered = 0;
    for wait in waits {
        let (outcome, took) = wait.await.unwrap();
        // The limit, and slack for a loaded machine after a restart (was: 1 s).
        assert!(
            took <= limit + Duration::from_secs(2),
            "within the limit + 2 s: {took:?}"
        );
        if matches!(outcome.unwrap(), WaitOutcome::Done(_)) {
            answered += 1;
        }
    }
    assert!(
        answered > 0,
        "finished jobs were answered after the restart"
    );
    assert!(answered <= 32);

    wait_until(Duration::from_secs(15), || async {
        jobs.listener_connected()
    })
    .await;
    let later = insert::<Noop>(&pool, &json!({})).await.unwrap();
    let wait = spawn_wait(&jobs, &[later], Duration::from_secs(5));
    until_waiting(&jobs, 1).await;
    finish_by_hand(&pool, later).await;
    assert!(matches!(
        wait.await.unwrap().0.unwrap(),
        WaitOutcome::Done(_)
    ));

    listening.stop().await;
    pool.close().await;
    tokio::task::spawn_blocking(move || cluster.stop())
        .await
        .unwrap()
        .unwrap();
}
