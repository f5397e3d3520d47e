//! Queues (docs/jobs.md): a pause is stored and obeyed by every process, survives a
//! restart, and a resume runs the waiting jobs at once; the tools and the page's server
//! functions show every queue's figures and refuse unknown queues with words.

use crate::common;

use std::time::Duration;

use axum::http::StatusCode;
use common::TestApp;
use common::jobs::{client, quick_config, start_engine, wait_for_state};
use common::mcp::{TOKEN, structured};
use serde_json::{Value, json};
use sqlx::PgPool;
use standmeet::model::JobState;
use standmeet_jobs::{EngineConfig, JobId, QueueConfig, builtin};

/// Two queues that look for work only every 10 s, so that a prompt run proves the
/// notification: `default` (the one paused) and `other` (the control).
fn two_queues() -> EngineConfig {
    let mut config = quick_config(4);
    config
        .queues
        .push(QueueConfig::new("other", 4, Duration::from_secs(10)));
    config
}

/// Inserts a `system.noop` job into `queue` by SQL, as an operator would.
async fn noop_by_sql(pool: &PgPool, queue: &str) -> JobId {
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO jobs (kind, queue) VALUES ('system.noop', $1) RETURNING id",
    )
    .bind(queue)
    .fetch_one(pool)
    .await
    .unwrap();
    JobId(id)
}

/// The queue called `name` in a JSON list of queues.
fn named(queues: &Value, name: &str) -> Value {
    queues
        .as_array()
        .expect("a list of queues")
        .iter()
        .find(|queue| queue["name"] == name)
        .unwrap_or_else(|| panic!("no queue {name} in {queues}"))
        .clone()
}

async fn state_of(pool: &PgPool, id: JobId) -> JobState {
    client(pool).get(id).await.unwrap().expect("the job").state
}

#[sqlx::test(migrations = false)]
async fn a_paused_queue_waits_in_every_process_and_across_restarts_until_resumed(pool: PgPool) {
    crate::common::schema(&pool).await;
    let jobs = client(&pool);
    // Two processes on one database.
    let first = start_engine(&pool, builtin::registry(), two_queues()).await;
    let second = start_engine(&pool, builtin::registry(), two_queues()).await;

    let paused = jobs.pause_queue("default").await.unwrap();
    assert!(paused.paused);
    let waiting = noop_by_sql(&pool, "default").await;
    // The control, inserted after it: both processes were told of both at once, and
    // the control ran, so the paused queue's producers had their turn too.
    let control = noop_by_sql(&pool, "other").await;
    wait_for_state(&pool, control, JobState::Completed).await;
    assert_eq!(state_of(&pool, waiting).await, JobState::Available);

    // A restart does not forget the pause.
    first.shutdown().await;
    second.shutdown().await;
    let restarted = start_engine(&pool, builtin::registry(), two_queues()).await;
    let control = noop_by_sql(&pool, "other").await;
    wait_for_state(&pool, control, JobState::Completed).await;
    assert_eq!(state_of(&pool, waiting).await, JobState::Available);
    let listed = jobs.queues().await.unwrap();
    let default = listed.iter().find(|q| q.name == "default").unwrap();
    assert!(default.paused);
    assert_eq!(default.counts["available"], 1);
    assert!(default.oldest_available_age_s.is_some());

    // Resumed, the job runs at once: well before the queue's 10 s poll.
    let resumed = jobs.resume_queue("default").await.unwrap();
    assert!(!resumed.paused);
    let started = std::time::Instant::now();
    wait_for_state(&pool, waiting, JobState::Completed).await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the resume woke the queue ({:?})",
        started.elapsed()
    );
    let listed = jobs.queues().await.unwrap();
    let default = listed.iter().find(|q| q.name == "default").unwrap();
    assert_eq!(default.counts["completed"], 1);
    assert_eq!(default.finished_last_5m, 1);
    assert_eq!(default.oldest_available_age_s, None);
    restarted.shutdown().await;
}

#[sqlx::test(migrations = false)]
async fn the_queue_tools_list_pause_and_resume(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::desk(&pool)
        .setting("STANDMEET_MCP_TOKEN", TOKEN)
        .spawn()
        .await;
    noop_by_sql(&pool, "reports").await;

    let listed = structured(&app.call_tool("queues.list", json!({})).await);
    let queues = listed["queues"].as_array().unwrap();
    let names: Vec<&str> = queues.iter().map(|q| q["name"].as_str().unwrap()).collect();
    // StandMeet's own queues, and one that only has a job.
    assert_eq!(
        names,
        ["default", "fetch", "index", "mail", "reports", "webhooks"]
    );
    let reports = &queues[4];
    assert_eq!(reports["paused"], json!(false));
    assert_eq!(reports["counts"]["available"], json!(1));
    assert_eq!(reports["counts"]["completed"], json!(0));
    assert_eq!(
        reports["counts"].as_object().unwrap().len(),
        JobState::ALL.len()
    );
    assert_eq!(reports["finished_last_5m"], json!(0));
    assert!(reports["oldest_available_age_s"].as_f64().unwrap() >= 0.0);
    assert_eq!(queues[0]["oldest_available_age_s"], Value::Null);

    let paused = app
        .call_tool("queues.pause", json!({ "queue": "mail" }))
        .await;
    assert_eq!(structured(&paused)["name"], json!("mail"));
    assert_eq!(structured(&paused)["paused"], json!(true));
    // Pausing twice is no error; the queue stays paused.
    let again = app
        .call_tool("queues.pause", json!({ "queue": "mail" }))
        .await;
    assert_eq!(structured(&again)["paused"], json!(true));
    let listed = structured(&app.call_tool("queues.list", json!({})).await);
    assert_eq!(named(&listed["queues"], "mail")["paused"], json!(true));

    let resumed = app
        .call_tool("queues.resume", json!({ "queue": "mail" }))
        .await;
    assert_eq!(structured(&resumed)["paused"], json!(false));

    let unknown = app
        .call_tool("queues.pause", json!({ "queue": "nope" }))
        .await;
    assert_eq!(unknown["isError"], json!(true));
    let words = unknown.to_string();
    assert!(words.contains("There is no queue \\\"nope\\\""), "{words}");
    assert!(
        words.contains("default, fetch, index, mail, reports, webhooks"),
        "{words}"
    );
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM job_queue_pauses")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(count, 0, "an unknown queue is not paused");
}

#[sqlx::test(migrations = false)]
async fn the_pages_pause_and_resume_are_for_admins_and_refuse_unknown_queues(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::desk(&pool).spawn().await;
    let anonymous = app
        .post_form("/api/queues/pause", &[("queue", "mail")], None)
        .await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        app.get("/api/queues/list").await.status,
        StatusCode::UNAUTHORIZED
    );

    let cookie = app.sign_in_admin().await;
    let paused = app
        .post_form("/api/queues/pause", &[("queue", "mail")], Some(&cookie))
        .await;
    assert_eq!(paused.status, StatusCode::OK, "{}", paused.body);
    assert!(paused.body.contains("Queue mail paused"), "{}", paused.body);
    let listed = app.get_with_cookie("/api/queues/list", &cookie).await;
    assert_eq!(listed.status, StatusCode::OK);
    assert_eq!(named(&listed.json(), "mail")["paused"], json!(true));

    let unknown = app
        .post_form("/api/queues/resume", &[("queue", "nope\0")], Some(&cookie))
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND, "{}", unknown.body);
    assert!(
        unknown.body.contains("There is no queue"),
        "{}",
        unknown.body
    );

    let resumed = app
        .post_form("/api/queues/resume", &[("queue", "mail")], Some(&cookie))
        .await;
    assert_eq!(resumed.status, StatusCode::OK, "{}", resumed.body);
    assert!(
        resumed.body.contains("Queue mail resumed"),
        "{}",
        resumed.body
    );
}
