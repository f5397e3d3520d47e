//! The Tasks panel's server side: the status poll's shape, auth and bad input; the
//! pages rendered on the server with their filters and paging; Retry and Cancel.

use crate::common;

use common::TestApp;

use crate::common::jobs::{insert, insert_with};
use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::json;
use sqlx::PgPool;
use standmeet_jobs::builtin::Noop;
use standmeet_jobs::{InsertOptions, JobId};

async fn completed_job(pool: &PgPool) -> JobId {
    let id = insert::<Noop>(pool, &json!({"done": true})).await.unwrap();
    sqlx::query("UPDATE jobs SET state = 'completed', attempt = 1, output = args WHERE id = $1")
        .bind(id.0)
        .execute(pool)
        .await
        .unwrap();
    id
}

async fn scheduled_job(pool: &PgPool) -> JobId {
    let later = time::OffsetDateTime::now_utc() + std::time::Duration::from_secs(3600);
    insert_with::<Noop>(
        pool,
        &json!({"later": true}),
        InsertOptions {
            scheduled_at: Some(later),
            ..Default::default()
        },
    )
    .await
    .unwrap()
}

#[sqlx::test(migrations = false)]
async fn the_status_poll_answers_rows_and_unknown_ids(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::builder(pool.clone()).spawn().await;
    let cookie = common::signed_in_cookie(&app, &pool).await;
    let done = completed_job(&pool).await;
    let waiting = scheduled_job(&pool).await;
    sqlx::query("UPDATE jobs SET errors = '[{\"attempt\": 1, \"at\": \"2026-11-29T10:00:00Z\", \"error\": \"boom\"}]' WHERE id = $1")
        .bind(waiting.0)
        .execute(&pool)
        .await
        .unwrap();

    let reply = common::get_with_cookie(
        &app,
        &format!("/api/jobs/status?ids={},{},999999", done, waiting),
        &cookie,
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let body = reply.json();
    assert_eq!(body["unknown"], json!([999999]));
    let jobs = body["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 2);
    let row = |id: JobId| jobs.iter().find(|job| job["id"] == id.0).unwrap().clone();
    let done_row = row(done);
    assert_eq!(done_row["state"], "completed");
    assert_eq!(done_row["kind"], "system.noop");
    assert_eq!(done_row["queue"], "default");
    assert_eq!(done_row["attempt"], 1);
    assert_eq!(done_row["max_attempts"], 25);
    // A finished job's time is when it finished; a waiting one's, when it runs next.
    let done_at = &done_row["finished_or_next_at"];
    assert!(
        done_at["exact"].as_str().unwrap().ends_with(" UTC"),
        "{done_at}"
    );
    assert!(
        done_at["relative"].as_str().unwrap().ends_with(" ago"),
        "{done_at}"
    );
    let waiting_row = row(waiting);
    assert_eq!(waiting_row["state"], "scheduled");
    assert_eq!(waiting_row["last_error"], "boom");
    let next_at = &waiting_row["finished_or_next_at"];
    assert!(
        next_at["relative"].as_str().unwrap().starts_with("in "),
        "{next_at}"
    );
}

#[sqlx::test(migrations = false)]
async fn the_status_poll_is_for_admins_only(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::builder(pool).spawn().await;
    let reply = common::get(&app, "/api/jobs/status?ids=1").await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
}

#[sqlx::test(migrations = false)]
async fn bad_ids_in_the_status_poll_get_a_clear_400(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::builder(pool.clone()).spawn().await;
    let cookie = common::signed_in_cookie(&app, &pool).await;
    let many = (1..=101)
        .map(|n| n.to_string())
        .collect::<Vec<_>>()
        .join(",");
    for (query, says) in [
        ("ids=1,abc", "\"abc\" is not a job id"),
        ("ids=", "Give the job ids"),
        ("", "Give the job ids"),
        ("ids=0", "\"0\" is not a job id"),
        (
            &format!("ids={many}")[..],
            "At most 100 job ids at once; 101 were asked for",
        ),
    ] {
        let reply =
            common::get_with_cookie(&app, &format!("/api/jobs/status?{query}"), &cookie).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{query}");
        let message = reply.json()["error"].as_str().unwrap().to_string();
        assert!(message.contains(says), "{query}: {message}");
    }
}

#[sqlx::test(migrations = false)]
async fn the_panel_is_rendered_on_the_server_with_its_filters(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::builder(pool.clone()).spawn().await;
    let cookie = common::signed_in_cookie(&app, &pool).await;
    let done = completed_job(&pool).await;
    let waiting = scheduled_job(&pool).await;

    let all = common::get_with_cookie(&app, "/admin/tasks", &cookie).await;
    assert_eq!(all.status, StatusCode::OK);
    for id in [done, waiting] {
        assert!(
            all.body
                .contains(&format!(r#"data-testid="task-row" data-job-id="{id}""#)),
            "{id}"
        );
    }
    assert!(
        all.body
            .contains(r#"data-testid="job-state" data-state="completed""#)
    );
    assert!(
        all.body
            .contains(r#"data-testid="state-count" data-state="scheduled""#)
    );

    let filtered = common::get_with_cookie(
        &app,
        "/admin/tasks?state=scheduled&kind=system.noop",
        &cookie,
    )
    .await;
    assert!(
        filtered
            .body
            .contains(&format!(r#"data-job-id="{waiting}""#))
    );
    assert!(!filtered.body.contains(&format!(r#"data-job-id="{done}""#)));
    assert!(
        filtered
            .body
            .contains(r#"<option value="scheduled" selected"#),
        "the filter shows as chosen"
    );

    let by_queue = common::get_with_cookie(&app, "/admin/tasks?queue=mail", &cookie).await;
    assert!(!by_queue.body.contains(r#"data-testid="task-row""#));
    assert!(by_queue.body.contains("No jobs match these filters."));
}

#[sqlx::test(migrations = false)]
async fn an_unknown_state_in_the_url_is_explained_with_a_400(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::builder(pool.clone()).spawn().await;
    let cookie = common::signed_in_cookie(&app, &pool).await;
    let reply = common::get_with_cookie(&app, "/admin/tasks?state=exploded", &cookie).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert!(
        reply
            .body
            .contains("There is no job state &quot;exploded&quot;")
            || reply.body.contains("There is no job state \"exploded\""),
        "{}",
        reply.body
    );
}

#[sqlx::test(migrations = false)]
async fn the_panel_pages_by_keyset_newest_first(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::builder(pool.clone()).spawn().await;
    let cookie = common::signed_in_cookie(&app, &pool).await;
    let mut ids = Vec::new();
    for n in 0..120 {
        ids.push(insert::<Noop>(&pool, &json!({ "n": n })).await.unwrap());
    }
    let row_ids = |body: &str| -> Vec<i64> {
        body.split(r#"data-testid="task-row" data-job-id=""#)
            .skip(1)
            .map(|rest| rest.split('"').next().unwrap().parse().unwrap())
            .collect()
    };
    let first = common::get_with_cookie(&app, "/admin/tasks", &cookie).await;
    let first_ids = row_ids(&first.body);
    let newest: Vec<i64> = ids.iter().rev().take(50).map(|id| id.0).collect();
    assert_eq!(first_ids, newest);
    let older = format!("/admin/tasks?before={}", newest.last().unwrap());
    assert!(
        first.body.contains(&format!(r#"href="{older}""#)),
        "an Older link"
    );

    let second = common::get_with_cookie(&app, &older, &cookie).await;
    let expected: Vec<i64> = ids.iter().rev().skip(50).take(50).map(|id| id.0).collect();
    assert_eq!(row_ids(&second.body), expected);
    let third = common::get_with_cookie(
        &app,
        &format!("/admin/tasks?before={}", expected.last().unwrap()),
        &cookie,
    )
    .await;
    assert_eq!(row_ids(&third.body).len(), 20);
    assert!(
        !third.body.contains(r#"data-testid="older-page""#),
        "the last page has no Older link"
    );
}

#[sqlx::test(migrations = false)]
async fn a_job_page_shows_args_output_and_errors_and_an_unknown_one_is_404(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::builder(pool.clone()).spawn().await;
    let cookie = common::signed_in_cookie(&app, &pool).await;
    let done = completed_job(&pool).await;
    let page = common::get_with_cookie(&app, &format!("/admin/tasks/{done}"), &cookie).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains(&format!("Job {done}")));
    assert!(
        page.body.contains("&quot;done&quot;: true") || page.body.contains("\"done\": true"),
        "pretty JSON args"
    );

    for path in ["/admin/tasks/424242", "/admin/tasks/not-a-number"] {
        let reply = common::get_with_cookie(&app, path, &cookie).await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{path}");
        assert!(reply.body.contains("Page not found"), "{path}");
    }
}

async fn post_action(
    app: &axum::Router,
    cookie: &str,
    action: &str,
    id: JobId,
) -> serde_json::Value {
    let reply = common::send(
        app,
        Request::post(format!("/api/tasks/{action}"))
            .header("cookie", cookie)
            .header("sec-fetch-site", "same-origin")
            .header("content-type", "application/x-www-form-urlencoded")
            .header("accept", "application/json")
            .body(Body::from(format!("id={id}")))
            .unwrap(),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{action}: {}", reply.body);
    reply.json()
}

#[sqlx::test(migrations = false)]
async fn retry_and_cancel_say_what_they_did_and_what_no_longer_applies(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::builder(pool.clone()).spawn().await;
    let cookie = common::signed_in_cookie(&app, &pool).await;
    let waiting = scheduled_job(&pool).await;

    let cancelled = post_action(&app, &cookie, "cancel", waiting).await;
    assert_eq!(cancelled["done"], true);
    assert_eq!(cancelled["message"], format!("Job {waiting} cancelled."));
    let again = post_action(&app, &cookie, "cancel", waiting).await;
    assert_eq!(again["done"], false);
    assert!(
        again["message"]
            .as_str()
            .unwrap()
            .contains("already cancelled")
    );

    let retried = post_action(&app, &cookie, "retry", waiting).await;
    assert_eq!(retried["done"], true);
    assert!(retried["message"].as_str().unwrap().contains("queued"));
    let state: String = sqlx::query_scalar("SELECT state::text FROM jobs WHERE id = $1")
        .bind(waiting.0)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(state, "available");

    let done = completed_job(&pool).await;
    let not_retryable = post_action(&app, &cookie, "retry", done).await;
    assert_eq!(not_retryable["done"], false);
    assert!(
        not_retryable["message"]
            .as_str()
            .unwrap()
            .contains("is completed now")
    );
}

#[sqlx::test(migrations = false)]
async fn retry_and_cancel_need_an_admin(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::builder(pool.clone()).spawn().await;
    let waiting = scheduled_job(&pool).await;
    for action in ["retry", "cancel"] {
        let reply = common::send(
            &app,
            Request::post(format!("/api/tasks/{action}"))
                .header("content-type", "application/x-www-form-urlencoded")
                .body(Body::from(format!("id={waiting}")))
                .unwrap(),
        )
        .await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{action}");
    }
    let state: String = sqlx::query_scalar("SELECT state::text FROM jobs WHERE id = $1")
        .bind(waiting.0)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(state, "scheduled", "nothing changed");
}

/// Posts a bulk action with `ids` as the Tasks panel's browser does.
async fn post_bulk(app: &axum::Router, cookie: &str, action: &str, ids: &[i64]) -> common::Reply {
    let body: Vec<String> = ids
        .iter()
        .enumerate()
        .map(|(n, id)| format!("ids%5B{n}%5D={id}"))
        .collect();
    common::send(
        app,
        Request::post(format!("/api/tasks/{action}"))
            .header("cookie", cookie)
            .header("sec-fetch-site", "same-origin")
            .header("content-type", "application/x-www-form-urlencoded")
            .header("accept", "application/json")
            .body(Body::from(body.join("&")))
            .unwrap(),
    )
    .await
}

async fn states(pool: &PgPool, ids: &[i64]) -> Vec<String> {
    sqlx::query_scalar("SELECT state::text FROM jobs WHERE id = ANY($1) ORDER BY id")
        .bind(ids)
        .fetch_all(pool)
        .await
        .unwrap()
}

#[sqlx::test(migrations = false)]
async fn bulk_actions_change_what_they_apply_to_in_one_go_and_say_why_not_the_rest(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::builder(pool.clone()).spawn().await;
    let cookie = common::signed_in_cookie(&app, &pool).await;
    let mut discarded = Vec::new();
    for _ in 0..3 {
        let id = completed_job(&pool).await;
        sqlx::query("UPDATE jobs SET state = 'discarded' WHERE id = $1")
            .bind(id.0)
            .execute(&pool)
            .await
            .unwrap();
        discarded.push(id.0);
    }
    let done = completed_job(&pool).await.0;

    // Retry: the three discarded ones; the completed one stays, with the reason.
    let mut selected = discarded.clone();
    selected.push(done);
    let retried = post_bulk(&app, &cookie, "retry_selected", &selected).await;
    assert_eq!(retried.status, StatusCode::OK, "{}", retried.body);
    assert_eq!(
        retried.json()["message"],
        format!("3 jobs retried; 1 could not be: job {done} is completed.")
    );
    assert_eq!(states(&pool, &discarded).await, ["available"; 3]);

    // Cancel: the three (now available) ones at once.
    let cancelled = post_bulk(&app, &cookie, "cancel_selected", &discarded).await;
    assert_eq!(cancelled.json()["message"], "3 jobs cancelled.");
    assert_eq!(states(&pool, &discarded).await, ["cancelled"; 3]);

    // Delete: finished jobs only; a waiting one and a missing one are named.
    let waiting = scheduled_job(&pool).await.0;
    let mut selected = discarded.clone();
    selected.extend([waiting, 999_999]);
    let deleted = post_bulk(&app, &cookie, "delete_selected", &selected).await;
    assert_eq!(
        deleted.json()["message"],
        format!("3 jobs deleted; 2 could not be: job {waiting} is scheduled, job 999999 is gone.")
    );
    assert!(states(&pool, &discarded).await.is_empty());
    assert_eq!(states(&pool, &[waiting]).await, ["scheduled"]);

    // Nothing selected, or too much: 400 with words; without a session: 401.
    let none = post_bulk(&app, &cookie, "retry_selected", &[]).await;
    assert_eq!(none.status, StatusCode::BAD_REQUEST, "{}", none.body);
    let many: Vec<i64> = (1..=101).collect();
    let too_many = post_bulk(&app, &cookie, "delete_selected", &many).await;
    assert_eq!(too_many.status, StatusCode::BAD_REQUEST);
    assert!(
        too_many.body.contains("At most 100 jobs at once"),
        "{}",
        too_many.body
    );
    let anonymous =
        common::post_form(&app, "/api/tasks/delete_selected", &[("ids[0]", "1")], None).await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
}

#[sqlx::test(migrations = false)]
async fn the_chart_reads_only_the_last_hour_even_with_a_million_jobs_kept(pool: PgPool) {
    crate::common::schema(&pool).await;
    // About 21,000 of the million in the last hour.
    common::jobs::a_million_finished_jobs(&pool).await;
    // (That its query reads an index and no more is the engine's test: `chart.rs`.)
    let app = TestApp::builder(pool.clone()).spawn().await;
    let cookie = common::signed_in_cookie(&app, &pool).await;
    let this_minute = || async {
        sqlx::query_scalar::<_, time::OffsetDateTime>("SELECT date_trunc('minute', now())")
            .fetch_one(&pool)
            .await
            .unwrap()
    };
    // What the chart shows is what finished in its hour: counted and shown within one
    // minute (the hour moves on at the next; then both are taken again).
    for _ in 0..3 {
        let before = this_minute().await;
        let in_the_hour: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM jobs WHERE finalized_at >= $1 - interval '59 minutes'",
        )
        .bind(before)
        .fetch_one(&pool)
        .await
        .unwrap();
        assert!((20_000..22_000).contains(&in_the_hour), "{in_the_hour}");
        let page = common::get_with_cookie(&app, "/admin/tasks", &cookie).await;
        if this_minute().await != before {
            continue;
        }
        assert_eq!(page.status, StatusCode::OK);
        assert!(page.body.contains(r#"data-testid="throughput-chart""#));
        assert_eq!(
            page.body
                .matches(r#"data-testid="throughput-minute""#)
                .count(),
            60
        );
        let shown: i64 = page
            .body
            .split(r#"data-total=""#)
            .skip(1)
            .map(|rest| rest[..rest.find('"').unwrap()].parse::<i64>().unwrap())
            .sum();
        // No job finishes meanwhile here.
        assert_eq!(
            shown, in_the_hour,
            "counted and shown in the minute of {before}"
        );
        return;
    }
    panic!("three tries each crossed a minute boundary");
}

#[sqlx::test(migrations = false)]
async fn the_panel_finds_a_job_by_id_or_by_what_its_arguments_contain(pool: PgPool) {
    crate::common::schema(&pool).await;
    let seven = insert::<Noop>(&pool, &json!({"request_id": 7, "note": "a"}))
        .await
        .unwrap();
    let eight = insert::<Noop>(&pool, &json!({"request_id": 8}))
        .await
        .unwrap();
    let app = TestApp::builder(pool.clone()).spawn().await;
    let cookie = common::signed_in_cookie(&app, &pool).await;
    let rows_of = |body: &str| -> Vec<String> {
        body.split(r#"data-testid="task-row" data-job-id=""#)
            .skip(1)
            .map(|rest| rest[..rest.find('"').unwrap()].to_string())
            .collect()
    };

    let by_args =
        common::get_with_cookie(&app, "/admin/tasks?q=%7B%22request_id%22%3A+7%7D", &cookie).await;
    assert_eq!(by_args.status, StatusCode::OK);
    assert_eq!(rows_of(&by_args.body), [seven.0.to_string()]);

    let by_id =
        common::get_with_cookie(&app, &format!("/admin/tasks?q={}", eight.0), &cookie).await;
    assert_eq!(rows_of(&by_id.body), [eight.0.to_string()]);

    for bad in ["%5B1%2C2%5D", "%7Bnot+json", "hello"] {
        let refused =
            common::get_with_cookie(&app, &format!("/admin/tasks?q={bad}"), &cookie).await;
        assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{bad}");
        assert!(
            refused.body.contains("Search by a job id (42)"),
            "{bad}: {}",
            refused.body
        );
    }
}

#[sqlx::test(migrations = false)]
async fn the_panels_poll_for_new_rows_answers_on_an_empty_database_and_then_finds_the_first_job(
    pool: PgPool,
) {
    crate::common::schema(&pool).await;
    // What the Tasks panel asks every two seconds while it shows no row: no filter, no
    // `after` (there is no newest row yet), so an empty query string.
    let app = TestApp::builder(pool.clone()).spawn().await;
    let cookie = common::signed_in_cookie(&app, &pool).await;
    let empty = common::get_with_cookie(&app, "/api/tasks/list", &cookie).await;
    assert_eq!(empty.status, StatusCode::OK, "{}", empty.body);
    assert_eq!(empty.json()["rows"], json!([]));

    let first = completed_job(&pool).await;
    let found = common::get_with_cookie(&app, "/api/tasks/list", &cookie).await;
    assert_eq!(found.status, StatusCode::OK, "{}", found.body);
    let rows = found.json()["rows"].as_array().unwrap().clone();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["id"], json!(first.0));

    // A live read of no job at all is an empty answer, not a decoding error.
    let none = common::get_with_cookie(&app, "/api/tasks/rows", &cookie).await;
    assert_eq!(none.status, StatusCode::OK, "{}", none.body);
    assert_eq!(none.json(), json!([]));
}
