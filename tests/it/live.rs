//! Live job states over Server-Sent Events (docs/jobs.md): `GET /api/live?ids=…` sends
//! each job's state at once and every change after, fed by the process's one LISTEN
//! connection (a hundred streams hold no database connection); 401 without a session,
//! 400 for bad ids, 503 past `STANDMEET_MAX_LIVE_CLIENTS`; a stream ends when its session
//! does.

use crate::common;

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use common::TestApp;
use serde_json::{Value, json};
use sqlx::PgPool;

/// One open stream, read over real HTTP as a browser's EventSource would.
struct LiveStream {
    response: reqwest::Response,
    buffer: String,
}

impl LiveStream {
    async fn open(app: &TestApp, cookie: &str, ids: &[i64]) -> LiveStream {
        let response = request(app, Some(cookie), ids).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(
            response.headers()["content-type"],
            "text/event-stream",
            "an event stream"
        );
        LiveStream {
            response,
            buffer: String::new(),
        }
    }

    /// The next `job` event's data, or `None` when the stream ended; panics after
    /// `limit`.
    async fn next_job(&mut self, limit: Duration) -> Option<Value> {
        let deadline = Instant::now() + limit;
        loop {
            while let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let is_job = block.lines().any(|line| line == "event: job");
                let data = block
                    .lines()
                    .find_map(|line| line.strip_prefix("data: "))
                    .map(|data| serde_json::from_str::<Value>(data).expect("JSON data"));
                if is_job {
                    return Some(data.expect("a job event has data"));
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let chunk = tokio::time::timeout(left, self.response.chunk())
                .await
                .unwrap_or_else(|_| panic!("no job event within {limit:?}"))
                .expect("the stream reads");
            match chunk {
                Some(bytes) => self.buffer.push_str(&String::from_utf8_lossy(&bytes)),
                None => return None,
            }
        }
    }

    /// The next event for job `id` in state `state`, skipping others.
    async fn until_state(&mut self, id: i64, state: &str) -> Value {
        loop {
            let job = self
                .next_job(Duration::from_secs(10))
                .await
                .expect("the stream is open");
            if job["id"] == json!(id) && job["state"] == json!(state) {
                return job;
            }
        }
    }
}

async fn request(app: &TestApp, cookie: Option<&str>, ids: &[i64]) -> reqwest::Response {
    let ids: Vec<String> = ids.iter().map(i64::to_string).collect();
    let mut request =
        reqwest::Client::new().get(app.url(&format!("/api/live?ids={}", ids.join(","))));
    if let Some(cookie) = cookie {
        request = request.header("cookie", cookie);
    }
    request.send().await.expect("the server answers")
}

/// A job that waits, by SQL: `scheduled` an hour from now.
async fn waiting_job(pool: &PgPool) -> i64 {
    sqlx::query_scalar(
        "INSERT INTO jobs (kind, state, scheduled_at) VALUES ('system.noop', 'scheduled', now() + interval '1 hour') RETURNING id",
    )
    .fetch_one(pool)
    .await
    .unwrap()
}

#[sqlx::test(migrations = false)]
async fn a_stream_sends_each_state_at_once_then_every_change(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::desk(&pool).jobs().spawn().await;
    let cookie = app.sign_in_admin().await;
    let flaky: i64 = sqlx::query_scalar(
        "INSERT INTO jobs (kind, args, state, scheduled_at) VALUES ('system.flaky', '{\"fail_until_attempt\": 2}', 'scheduled', now() + interval '1 hour') RETURNING id",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    let mut stream = LiveStream::open(&app, &cookie, &[flaky, 999_999]).await;
    let first = stream.next_job(Duration::from_secs(5)).await.unwrap();
    assert_eq!(
        first,
        json!({"id": flaky, "state": "scheduled", "attempt": 0, "errors_count": 0})
    );

    // Due now: it fails once (retryable, one error), then completes.
    sqlx::query("UPDATE jobs SET state = 'available', scheduled_at = now() WHERE id = $1")
        .bind(flaky)
        .execute(&pool)
        .await
        .unwrap();
    let done = stream.until_state(flaky, "completed").await;
    assert_eq!(done["attempt"], json!(2));
    assert_eq!(done["errors_count"], json!(1));
}

#[sqlx::test(migrations = false)]
async fn bad_requests_are_refused_with_words(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::desk(&pool)
        .setting("STANDMEET_MAX_LIVE_CLIENTS", "1")
        .jobs()
        .spawn()
        .await;
    let id = waiting_job(&pool).await;
    assert_eq!(
        request(&app, None, &[id]).await.status(),
        StatusCode::UNAUTHORIZED
    );
    let cookie = app.sign_in_admin().await;
    let no_ids = reqwest::Client::new()
        .get(app.url("/api/live?ids=1,x"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(no_ids.status(), StatusCode::BAD_REQUEST);
    assert!(no_ids.text().await.unwrap().contains("is not a job id"));

    let mut open = LiveStream::open(&app, &cookie, &[id]).await;
    open.next_job(Duration::from_secs(5)).await.unwrap();
    let second = request(&app, Some(&cookie), &[id]).await;
    assert_eq!(second.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        second
            .text()
            .await
            .unwrap()
            .contains("STANDMEET_MAX_LIVE_CLIENTS"),
        "the 503 says why"
    );
    // The place is given back when the stream goes.
    drop(open);
    common::jobs::wait_until(Duration::from_secs(5), || async {
        request(&app, Some(&cookie), &[id]).await.status() == StatusCode::OK
    })
    .await;
}

#[sqlx::test(migrations = false)]
async fn a_hundred_streams_share_the_one_listen_connection_and_hold_no_database_connection(
    pool: PgPool,
) {
    crate::common::schema(&pool).await;
    let app = TestApp::desk(&pool).jobs().spawn().await;
    let cookie = app.sign_in_admin().await;
    let id = waiting_job(&pool).await;
    let connections = || async {
        sqlx::query_as::<_, (i64, i64)>(
            "SELECT count(*), count(*) FILTER (WHERE query LIKE 'LISTEN%')
             FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()",
        )
        .fetch_one(&pool)
        .await
        .unwrap()
    };
    let mut streams = Vec::new();
    for _ in 0..100 {
        let mut stream = LiveStream::open(&app, &cookie, &[id]).await;
        let first = stream.next_job(Duration::from_secs(5)).await.unwrap();
        assert_eq!(first["state"], json!("scheduled"));
        streams.push(stream);
    }
    let (open, listening) = connections().await;
    assert_eq!(listening, 1, "one LISTEN connection for the process");
    // The app's and the engine's pools, and the test's own (16 + 10 + a few): far fewer
    // than the hundred streams.
    assert!(open < 40, "{open} connections with 100 streams open");

    // An operator cancels the job by hand: every stream hears it.
    let committed = Instant::now();
    sqlx::query("UPDATE jobs SET state = 'cancelled', finalized_at = now() WHERE id = $1")
        .bind(id)
        .execute(&pool)
        .await
        .unwrap();
    let mut slowest = Duration::ZERO;
    for stream in &mut streams {
        stream.until_state(id, "cancelled").await;
        slowest = slowest.max(committed.elapsed());
    }
    println!("the last of 100 streams heard the cancel {slowest:?} after its commit");
    let (open_after, _) = connections().await;
    assert!(open_after < 40, "{open_after} connections");
}

#[sqlx::test(migrations = false)]
async fn a_stream_ends_when_its_session_signs_out(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::desk(&pool).jobs().spawn().await;
    let cookie = app.sign_in_admin().await;
    let id = waiting_job(&pool).await;
    let mut stream = LiveStream::open(&app, &cookie, &[id]).await;
    stream.next_job(Duration::from_secs(5)).await.unwrap();
    let signed_out = app.post_form("/logout", &[], Some(&cookie)).await;
    assert!(signed_out.status.is_redirection(), "{}", signed_out.status);
    assert_eq!(stream.next_job(Duration::from_secs(10)).await, None);
}

#[sqlx::test(migrations = false)]
async fn a_stream_ends_when_its_session_is_gone_from_another_process(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::desk(&pool).jobs().spawn().await;
    let cookie = app.sign_in_admin().await;
    let id = waiting_job(&pool).await;
    let mut stream = LiveStream::open(&app, &cookie, &[id]).await;
    stream.next_job(Duration::from_secs(5)).await.unwrap();
    // Signed out elsewhere (or expired): the row is gone. The hub checks every 5 s.
    sqlx::query("DELETE FROM sessions")
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(stream.next_job(Duration::from_secs(15)).await, None);
}

#[sqlx::test(migrations = false)]
async fn a_stream_ends_when_its_admin_changes_the_password_or_is_removed(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::desk(&pool).jobs().spawn().await;
    let id = waiting_job(&pool).await;

    // A password change ends the sessions signed in before it: their streams too.
    let cookie = app.sign_in_admin().await;
    let mut stream = LiveStream::open(&app, &cookie, &[id]).await;
    stream.next_job(Duration::from_secs(5)).await.unwrap();
    let email = standmeet::types::EmailAddress::parse(common::ADMIN_EMAIL).unwrap();
    assert!(
        standmeet::domain::admins::set_password(&pool, &email, "a brand new password")
            .await
            .unwrap()
    );
    // The session row is still there: only the sign-in's time tells. The hub checks
    // every 5 s.
    assert_eq!(
        common::count(&pool, "SELECT count(*) FROM sessions").await,
        1
    );
    assert_eq!(stream.next_job(Duration::from_secs(15)).await, None);

    // An admin removed (by an operator, in SQL) ends theirs. (Signing in again sets
    // the test's password back first.)
    let cookie = app.sign_in_admin().await;
    let mut stream = LiveStream::open(&app, &cookie, &[id]).await;
    stream.next_job(Duration::from_secs(5)).await.unwrap();
    sqlx::query("DELETE FROM admins")
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(stream.next_job(Duration::from_secs(15)).await, None);
}
