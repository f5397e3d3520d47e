//! The overview (`/admin`): admins only, where sign-in lands, and each card's figure
//! the same as what it stands for, after changes made the way operators make them
//! (plain SQL beside the engine's own calls).

use crate::common;

use crate::common::jobs::insert;
use axum::http::StatusCode;
use common::TestApp;
use serde_json::{Value, json};
use sqlx::PgPool;
use standmeet_jobs::JobId;
use standmeet_jobs::builtin::Noop;

/// The card called `name` on the overview page's HTML: its `data-count`.
fn card_count(html: &str, name: &str) -> i64 {
    let marker = format!("data-card=\"{name}\" data-count=\"");
    let start = html
        .find(&marker)
        .unwrap_or_else(|| panic!("no card {name} on the page"))
        + marker.len();
    let end = start + html[start..].find('"').expect("the count's closing quote");
    html[start..end].parse().expect("a number")
}

/// The queue called `name` in the overview's answer.
fn queue_named(overview: &Value, name: &str) -> Value {
    overview["queues"]
        .as_array()
        .expect("a list of queues")
        .iter()
        .find(|queue| queue["name"] == name)
        .unwrap_or_else(|| panic!("no queue {name} in {overview}"))
        .clone()
}

async fn job_in_state(pool: &PgPool, state: &str) -> JobId {
    let id = insert::<Noop>(pool, &json!({})).await.unwrap();
    sqlx::query("UPDATE jobs SET state = $2::job_state, attempt = 1 WHERE id = $1")
        .bind(id.0)
        .bind(state)
        .execute(pool)
        .await
        .unwrap();
    id
}

#[sqlx::test(migrations = false)]
async fn the_overview_is_for_admins_and_counts_what_needs_attention(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::desk(&pool).spawn().await;
    assert_eq!(
        app.get("/api/overview").await.status,
        StatusCode::UNAUTHORIZED
    );
    let cookie = app.sign_in_admin().await;

    // Nothing needs attention on a fresh desk.
    let fresh = app.get_with_cookie("/api/overview", &cookie).await;
    assert_eq!(fresh.status, StatusCode::OK, "{}", fresh.body);
    let fresh = fresh.json();
    for field in ["failed_last_hour", "retrying", "requests_waiting"] {
        assert_eq!(fresh[field], json!(0), "{field}: {fresh}");
    }
    assert_eq!(fresh["disabled_webhooks"], json!([]));
    assert_eq!(fresh["paused_queues"], json!([]));

    // Two discarded jobs and a retryable one; a completed one counts nowhere.
    for state in ["discarded", "discarded", "retryable", "completed"] {
        job_in_state(&pool, state).await;
    }
    // Three requests, one of them decided.
    for (name, status) in [("A", "pending"), ("B", "pending"), ("C", "denied")] {
        sqlx::query(
            "INSERT INTO access_requests (name, email, status) VALUES ($1, $1 || '@example.com', $2::access_request_status)",
        )
        .bind(name)
        .bind(status)
        .execute(&pool)
        .await
        .unwrap();
    }
    // One endpoint of two disabled; the queue `mail` paused.
    for (url, enabled) in [
        ("https://hooks.example/gone", false),
        ("https://hooks.example/ok", true),
    ] {
        sqlx::query(
            "INSERT INTO webhook_endpoints (url, event_types, secret, enabled, disabled_reason) \
             VALUES ($1, '{*}', 'whsec_x', $2, CASE WHEN $2 THEN NULL ELSE 'It answered 410 Gone.' END)",
        )
        .bind(url)
        .bind(enabled)
        .execute(&pool)
        .await
        .unwrap();
    }
    let paused = app
        .post_form("/api/queues/pause", &[("queue", "mail")], Some(&cookie))
        .await;
    assert_eq!(paused.status, StatusCode::OK, "{}", paused.body);

    let overview: Value = app.get_with_cookie("/api/overview", &cookie).await.json();
    let discarded_in_table: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM jobs WHERE state = 'discarded' AND finalized_at > now() - interval '1 hour'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(discarded_in_table, 2);
    assert_eq!(overview["failed_last_hour"], json!(discarded_in_table));
    assert_eq!(overview["retrying"], json!(1));
    assert_eq!(overview["requests_waiting"], json!(2));
    assert_eq!(overview["oldest_request"], json!("0 s"));
    assert_eq!(
        overview["disabled_webhooks"][0]["url"],
        json!("https://hooks.example/gone")
    );
    assert_eq!(overview["disabled_webhooks"].as_array().unwrap().len(), 1);
    assert_eq!(overview["paused_queues"], json!(["mail"]));
    let default_queue = queue_named(&overview, "default");
    assert_eq!(default_queue["behind"], json!(false), "{default_queue}");

    // The page, rendered on the server, shows the same figures as links to their pages.
    let page = app.get_with_cookie("/admin", &cookie).await;
    assert_eq!(page.status, StatusCode::OK);
    assert_eq!(card_count(&page.body, "failed"), 2);
    assert_eq!(card_count(&page.body, "retrying"), 1);
    assert_eq!(card_count(&page.body, "requests"), 2);
    assert_eq!(card_count(&page.body, "webhooks"), 1);
    assert_eq!(card_count(&page.body, "paused"), 1);
    assert!(page.body.contains("href=\"/admin/tasks?state=discarded\""));
    assert!(
        page.body
            .contains("href=\"/admin/access-requests?status=pending\"")
    );
}

#[sqlx::test(migrations = false)]
async fn a_queue_whose_oldest_due_job_waited_over_a_minute_is_behind(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::desk(&pool).spawn().await;
    let cookie = app.sign_in_admin().await;
    // No engine runs here: a job due two minutes ago still waits.
    let id = insert::<Noop>(&pool, &json!({})).await.unwrap();
    sqlx::query("UPDATE jobs SET scheduled_at = now() - interval '2 minutes' WHERE id = $1")
        .bind(id.0)
        .execute(&pool)
        .await
        .unwrap();
    let overview: Value = app.get_with_cookie("/api/overview", &cookie).await.json();
    let default_queue = queue_named(&overview, "default");
    assert_eq!(default_queue["behind"], json!(true), "{default_queue}");
    assert_eq!(default_queue["available"], json!(1));
    assert_eq!(default_queue["oldest_available"], json!("2 min"));
}

#[sqlx::test(migrations = false)]
async fn the_next_bookings_are_the_five_soonest_confirmed_however_many_were_cancelled_first(
    pool: PgPool,
) {
    crate::common::schema(&pool).await;
    let app = TestApp::desk(&pool).spawn().await;
    let cookie = app.sign_in_admin().await;
    // Hour by hour from tomorrow: 25 cancelled bookings, then 7 confirmed ones; and a
    // confirmed one that has already started, which is not to come.
    for hour in -1..32 {
        let cancelled = (0..25).contains(&hour);
        sqlx::query(
            "INSERT INTO bookings (uid, starts_at, ends_at, blocked_until, name, email, booked_by, \
                                   state, cancelled_at, cancelled_by) \
             SELECT 'uid-' || $1, at, at + interval '30 minutes', at + interval '30 minutes', \
                    'Visitor ' || $1, 'v@example.com', 'visitor', \
                    CASE WHEN $2 THEN 'cancelled' ELSE 'confirmed' END::booking_state, \
                    CASE WHEN $2 THEN now() END, CASE WHEN $2 THEN 'admin' END \
             FROM (SELECT date_trunc('hour', now()) + $3 * interval '1 hour' AS at) t",
        )
        .bind(hour)
        .bind(cancelled)
        .bind(if hour < 0 { -2 } else { 24 + hour })
        .execute(&pool)
        .await
        .unwrap();
    }
    let expected: Vec<i64> = sqlx::query_scalar(
        "SELECT id FROM bookings WHERE state = 'confirmed' AND starts_at >= now() \
         ORDER BY starts_at LIMIT 5",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(expected.len(), 5);

    let overview: Value = app.get_with_cookie("/api/overview", &cookie).await.json();
    let shown: Vec<i64> = overview["next_bookings"]
        .as_array()
        .expect("a list of bookings")
        .iter()
        .map(|booking| booking["id"].as_i64().expect("an id"))
        .collect();
    assert_eq!(shown, expected, "{overview}");
}
