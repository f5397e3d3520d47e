//! The MCP endpoint over HTTP: the token, the golden tool list, approve with a fast and
//! with a slow SMTP server, and tool errors for bad arguments and unknown ids.

mod common;

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use common::smtp::SmtpPeer;
use serde_json::{Value, json};
use sqlx::PgPool;

use common::mcp::{TOKEN, call, rpc, structured};

fn settings(mail: &str, approve_wait_ms: &str) -> standmeet::config::Settings {
    common::settings_with(&[
        ("STANDMEET_MAIL", mail),
        ("STANDMEET_MCP_TOKEN", TOKEN),
        ("STANDMEET_OWNER_EMAIL", "owner@desk.example"),
        ("STANDMEET_APPROVE_WAIT_MS", approve_wait_ms),
    ])
}

async fn new_request(pool: &PgPool, email: &str) -> i64 {
    sqlx::query_scalar(
        "INSERT INTO access_requests (name, email) VALUES ('Agent Test', $1) RETURNING id",
    )
    .bind(email)
    .fetch_one(pool)
    .await
    .unwrap()
}

#[sqlx::test]
async fn without_the_right_token_mcp_answers_401(pool: PgPool) {
    let app = common::app_with(pool, settings("log", "2000"));
    for token in [None, Some("wrong-token")] {
        let (status, body) = rpc(&app, token, "tools/list", json!({})).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{token:?}");
        assert!(body["error"].as_str().unwrap().contains("bearer token"));
    }
}

#[sqlx::test]
async fn without_a_configured_token_there_is_no_mcp(pool: PgPool) {
    let app = common::app_with(pool, common::settings_with(&[]));
    let (status, _) = rpc(&app, Some(TOKEN), "tools/list", json!({})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[sqlx::test]
async fn the_tool_list_matches_the_golden_file(pool: PgPool) {
    let app = common::app_with(pool, settings("log", "2000"));
    let (status, init) = rpc(
        &app,
        Some(TOKEN),
        "initialize",
        json!({ "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": { "name": "test", "version": "1" } }),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(init["result"]["serverInfo"]["name"], "standmeet");

    let (_, list) = rpc(&app, Some(TOKEN), "tools/list", json!({})).await;
    let tools = &list["result"]["tools"];
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    for name in [
        "access_requests.list",
        "access_requests.approve",
        "tasks.get",
        "tasks.list",
    ] {
        assert!(names.contains(&name), "{name} in {names:?}");
    }
    let golden_path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/mcp_tools.json");
    let mut sorted = tools.as_array().unwrap().clone();
    sorted.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    let actual = serde_json::to_string_pretty(&sorted).unwrap() + "\n";
    if std::env::var("UPDATE_GOLDEN").is_ok() {
        std::fs::write(golden_path, &actual).unwrap();
    }
    let golden = std::fs::read_to_string(golden_path)
        .expect("tests/golden/mcp_tools.json exists (UPDATE_GOLDEN=1 writes it)");
    assert_eq!(
        actual, golden,
        "the MCP tool list changed; if that was meant, run the test with UPDATE_GOLDEN=1 and commit the file"
    );
}

#[sqlx::test]
async fn approve_with_a_fast_mail_server_answers_in_full_within_two_seconds(pool: PgPool) {
    let smtp = SmtpPeer::start().await;
    let (app, _state, jobs) =
        common::app_with_jobs(pool.clone(), settings(&smtp.url(), "2000")).await;
    let id = new_request(&pool, "fast@example.com").await;

    let started = Instant::now();
    let result = call(&app, "access_requests.approve", json!({ "id": id })).await;
    let took = started.elapsed();
    assert_eq!(result["isError"], false, "{result}");
    let answer = structured(&result);
    assert_eq!(answer["request_id"], id);
    assert_eq!(answer["status"], "replied");
    assert_eq!(answer["mail_state"], "sent");
    assert_eq!(answer["pending"], false);
    assert!(answer["mail_job_id"].as_i64().is_some());
    assert!(took < Duration::from_secs(2), "took {took:?}");
    assert_eq!(smtp.mails_to("fast@example.com").len(), 1);
    jobs.shutdown().await;
}

#[sqlx::test]
async fn approve_with_a_slow_mail_server_gives_a_receipt_then_tasks_get_shows_completed(
    pool: PgPool,
) {
    let smtp = SmtpPeer::start().await;
    smtp.answer_after(Duration::from_secs(3));
    let (app, _state, jobs) =
        common::app_with_jobs(pool.clone(), settings(&smtp.url(), "2000")).await;
    let id = new_request(&pool, "slow@example.com").await;

    let started = Instant::now();
    let result = call(&app, "access_requests.approve", json!({ "id": id })).await;
    let took = started.elapsed();
    let answer = structured(&result);
    assert_eq!(answer["pending"], true, "{answer}");
    assert_eq!(answer["status"], "approved");
    assert_eq!(answer["mail_state"], "sending");
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(3),
        "a receipt at the limit: {took:?}"
    );

    let job_id = answer["mail_job_id"].as_i64().unwrap();
    let mut state = Value::Null;
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        let task = structured(&call(&app, "tasks.get", json!({ "job_id": job_id })).await);
        state = task["state"].clone();
        if state == "completed" {
            assert_eq!(task["kind"], "access_request.approval_mail");
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(state, "completed");
    let listed =
        structured(&call(&app, "access_requests.list", json!({ "status": "replied" })).await);
    assert_eq!(listed["requests"][0]["id"], id);
    assert_eq!(listed["requests"][0]["mail_state"], "sent");
    jobs.shutdown().await;
}

#[sqlx::test]
async fn bad_arguments_and_unknown_ids_are_tool_errors_with_a_clear_message(pool: PgPool) {
    let app = common::app_with(pool.clone(), settings("log", "2000"));
    let id = new_request(&pool, "twice@example.com").await;
    sqlx::query("UPDATE access_requests SET status = 'denied' WHERE id = $1")
        .bind(id)
        .execute(&pool)
        .await
        .unwrap();

    for (tool, arguments, says) in [
        (
            "access_requests.approve",
            json!({ "id": 987654 }),
            "There is no access request 987654",
        ),
        (
            "access_requests.approve",
            json!({ "id": id }),
            "is denied already",
        ),
        ("access_requests.approve", json!({ "id": "seven" }), "id"),
        ("access_requests.approve", json!({}), "id"),
        (
            "access_requests.list",
            json!({ "status": "lost" }),
            "There is no request status \"lost\"",
        ),
        (
            "tasks.get",
            json!({ "job_id": 424242 }),
            "There is no job 424242",
        ),
        (
            "tasks.list",
            json!({ "state": "exploded" }),
            "There is no job state \"exploded\"",
        ),
        (
            "tasks.list",
            json!({ "limit": 0 }),
            "limit must be from 1 to 50",
        ),
    ] {
        let result = call(&app, tool, arguments.clone()).await;
        assert_eq!(result["isError"], true, "{tool} {arguments}: {result}");
        let text = result["structuredContent"]["error"]
            .as_str()
            .or(result["content"][0]["text"].as_str())
            .unwrap_or_default()
            .to_string();
        assert!(text.contains(says), "{tool} {arguments}: {result}");
    }
}

#[sqlx::test]
async fn tasks_list_gives_jobs_newest_first_with_their_state(pool: PgPool) {
    let app = common::app_with(pool.clone(), settings("log", "2000"));
    for n in 0..3 {
        standmeet::jobs::insert::<standmeet::jobs::builtin::Noop>(&pool, &json!({ "n": n }))
            .await
            .unwrap();
    }
    let listed = structured(
        &call(
            &app,
            "tasks.list",
            json!({ "kind": "system.noop", "limit": 2 }),
        )
        .await,
    );
    let tasks = listed["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 2);
    assert!(tasks[0]["id"].as_i64() > tasks[1]["id"].as_i64());
    assert_eq!(tasks[0]["state"], "available");
    assert!(tasks[0].get("output").is_none(), "state only");
}
