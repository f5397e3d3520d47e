//! Changing the owner's address: confirmed by a link minted when its mail is sent;
//! stale changes send nothing; expired, used and withdrawn links change nothing; and
//! the recovery phrase says what really happened.

use crate::common;

use axum::http::StatusCode;
use common::jobs::wait_for_state;
use common::{OWNER, TestApp};
use sqlx::PgPool;
use standmeet_jobs::{JobId, JobState};

async fn change_to(app: &TestApp, cookie: &str, email: &str) -> common::Reply {
    app.post_form(
        "/api/account/change_email",
        &[("new_email", email)],
        Some(cookie),
    )
    .await
}

async fn change_job(pool: &PgPool, email: &str) -> JobId {
    JobId(
        sqlx::query_scalar("SELECT pending_email_job_id FROM owner_email_changes WHERE new_email = $1 ORDER BY id DESC LIMIT 1")
            .bind(email)
            .fetch_one(pool)
            .await
            .unwrap(),
    )
}

/// The token in a confirmation mail.
fn token_in(mail: &str) -> String {
    let start = mail.find("token=").expect("a link in the mail") + "token=".len();
    let token: String = mail[start..]
        .chars()
        .take_while(char::is_ascii_hexdigit)
        .collect();
    assert_eq!(token.len(), 64, "a whole token in {mail}");
    token
}

/// The owner opens the link and presses "Confirm" (the page's POST).
async fn confirm(app: &TestApp, token: &str) -> common::Reply {
    app.get(&format!("/account/confirm-email?token={token}"))
        .await;
    app.post_form("/api/confirm_email", &[("token", token)], None)
        .await
}

/// The owner's address now (the database's, else the app's setting).
async fn owner_now(app: &TestApp) -> String {
    standmeet::domain::owner::owner_email(&app.pool, &app.state.settings)
        .await
        .unwrap()
        .unwrap()
        .to_string()
}

#[sqlx::test(migrations = false)]
async fn a_confirmed_link_changes_the_address_once(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::desk_with_mail(&pool).await;
    let smtp = app.smtp();
    let cookie = app.sign_in_admin().await;

    let reply = change_to(&app, &cookie, "new.owner@desk.example").await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert!(reply.body.contains("queued"));
    let job = change_job(&pool, "new.owner@desk.example").await;
    let row = wait_for_state(&pool, job, JobState::Completed).await;
    assert_eq!(row.output.unwrap()["sent"], true);
    let mails = smtp.mails_to("new.owner@desk.example");
    assert_eq!(mails.len(), 1);
    assert!(
        mails[0]
            .text()
            .contains("http://127.0.0.1:3000/account/confirm-email?token=")
    );
    assert_eq!(
        owner_now(&app).await,
        OWNER,
        "nothing changes before the link is opened"
    );

    let token = token_in(&mails[0].text());
    // Opening the link, as a mail scanner does, shows what it would do and changes
    // nothing; only the page's POST confirms.
    let opened = app
        .get(&format!("/account/confirm-email?token={token}"))
        .await;
    assert_eq!(opened.status, StatusCode::OK);
    assert!(opened.body.contains("Confirm the owner"), "{}", opened.body);
    let previewed = app
        .get(&format!("/api/confirm_email/preview?token={token}"))
        .await;
    assert_eq!(previewed.json(), "new.owner@desk.example");
    let by_get = app.get(&format!("/api/confirm_email?token={token}")).await;
    assert!(
        by_get.status.is_client_error(),
        "a GET cannot confirm: {}",
        by_get.status
    );
    assert_eq!(
        owner_now(&app).await,
        OWNER,
        "opening the link changed nothing"
    );
    let page = confirm(&app, &token).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        page.body.contains("new.owner@desk.example"),
        "{}",
        page.body
    );
    assert_eq!(owner_now(&app).await, "new.owner@desk.example");

    let again = confirm(&app, &token).await;
    assert_eq!(again.status, StatusCode::GONE);
    assert!(again.body.contains("already used"));
    let unknown = confirm(&app, "0123abcd").await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert!(unknown.body.contains("not valid"));

    // One `owner.email_changed`, written by the confirmation; the used link wrote none.
    let change_id: i64 = sqlx::query_scalar("SELECT id FROM owner_email_changes")
        .fetch_one(&pool)
        .await
        .unwrap();
    let changed = standmeet::domain::events::list(&pool, None, None, 10)
        .await
        .unwrap();
    assert_eq!(changed.len(), 1, "{changed:?}");
    assert_eq!(changed[0].event_type, "owner.email_changed");
    assert_eq!(changed[0].subject_id, Some(change_id));
    assert_eq!(
        changed[0].data,
        serde_json::json!({"change_id": change_id, "email": "new.owner@desk.example"})
    );
}

#[sqlx::test(migrations = false)]
async fn of_two_quick_changes_only_the_second_address_gets_a_mail(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::desk_with_mail(&pool).await;
    let smtp = app.smtp();
    let cookie = app.sign_in_admin().await;
    change_to(&app, &cookie, "first@desk.example").await;
    change_to(&app, &cookie, "second@desk.example").await;
    let first = change_job(&pool, "first@desk.example").await;
    let second = change_job(&pool, "second@desk.example").await;

    let first_row = wait_for_state(&pool, first, JobState::Completed).await;
    assert_eq!(
        first_row.output,
        Some(serde_json::json!({ "sent": false, "reason": "stale" }))
    );
    wait_for_state(&pool, second, JobState::Completed).await;
    assert!(smtp.mails_to("first@desk.example").is_empty());
    assert_eq!(smtp.mails_to("second@desk.example").len(), 1);
    let statuses: Vec<String> =
        sqlx::query_scalar("SELECT status::text FROM owner_email_changes ORDER BY id")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(statuses, vec!["superseded", "pending"]);
}

#[sqlx::test(migrations = false)]
async fn the_token_exists_only_after_the_send(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::desk_with_mail(&pool).await;
    let smtp = app.smtp();
    // Every send fails until the peer is told otherwise, so the checks below see a
    // failed send however long they take.
    smtp.refuse_every_mail("451 4.7.1 greylisted, try again");
    let cookie = app.sign_in_admin().await;
    change_to(&app, &cookie, "later@desk.example").await;
    let job = change_job(&pool, "later@desk.example").await;

    let token_stored = || async {
        sqlx::query_scalar::<_, bool>("SELECT token_hash IS NOT NULL FROM owner_email_changes WHERE new_email = 'later@desk.example'")
            .fetch_one(&pool)
            .await
            .unwrap()
    };
    assert!(!token_stored().await, "no token before any send");
    common::jobs::wait_for_errors(&pool, job, 1).await;
    assert!(!token_stored().await, "no token after a failed send");

    smtp.stop_refusing();
    wait_for_state(&pool, job, JobState::Completed).await;
    assert!(
        token_stored().await,
        "the token exists once the mail went out"
    );
}

#[sqlx::test(migrations = false)]
async fn expired_and_cancelled_links_change_nothing(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::desk_with_mail(&pool).await;
    let smtp = app.smtp();
    let cookie = app.sign_in_admin().await;

    change_to(&app, &cookie, "expired@desk.example").await;
    wait_for_state(
        &pool,
        change_job(&pool, "expired@desk.example").await,
        JobState::Completed,
    )
    .await;
    let token = token_in(&smtp.mails_to("expired@desk.example")[0].text());
    sqlx::query("UPDATE owner_email_changes SET token_expires_at = now() - interval '1 minute'")
        .execute(&pool)
        .await
        .unwrap();
    let page = confirm(&app, &token).await;
    assert_eq!(page.status, StatusCode::GONE);
    assert!(page.body.contains("has expired"));
    assert_eq!(owner_now(&app).await, OWNER);

    change_to(&app, &cookie, "cancelled@desk.example").await;
    wait_for_state(
        &pool,
        change_job(&pool, "cancelled@desk.example").await,
        JobState::Completed,
    )
    .await;
    let token = token_in(&smtp.mails_to("cancelled@desk.example")[0].text());
    let id: i64 = sqlx::query_scalar("SELECT id FROM owner_email_changes WHERE status = 'pending'")
        .fetch_one(&pool)
        .await
        .unwrap();
    let cancelled = app
        .post_form(
            "/api/account/cancel_change",
            &[("id", &id.to_string())],
            Some(&cookie),
        )
        .await;
    assert_eq!(cancelled.status, StatusCode::OK);
    let page = confirm(&app, &token).await;
    assert_eq!(page.status, StatusCode::GONE);
    assert!(page.body.contains("no longer valid"));
    assert_eq!(owner_now(&app).await, OWNER);
    let again = app
        .post_form(
            "/api/account/cancel_change",
            &[("id", &id.to_string())],
            Some(&cookie),
        )
        .await;
    assert_eq!(again.status, StatusCode::CONFLICT);
}

#[sqlx::test(migrations = false)]
async fn bad_same_or_unmailable_addresses_are_refused_with_400_and_write_nothing(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::desk(&pool)
        .setting("STANDMEET_MAIL", "log")
        .spawn()
        .await;
    let cookie = app.sign_in_admin().await;
    for (email, says) in [
        ("not-an-address", "one @"),
        (OWNER, "is already the owner's address"),
    ] {
        let reply = change_to(&app, &cookie, email).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{email}");
        assert!(reply.body.contains(says), "{email}: {}", reply.body);
    }
    let none = TestApp::desk(&pool)
        .setting("STANDMEET_MAIL", "none")
        .spawn()
        .await;
    let reply = change_to(&none, &cookie, "other@desk.example").await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert!(reply.body.contains("No mail supplier"));
    let changes = common::count(&pool, "SELECT count(*) FROM owner_email_changes").await;
    assert_eq!(changes, 0);
    let jobs = common::count(&pool, "SELECT count(*) FROM jobs").await;
    assert_eq!(jobs, 0);
}

#[sqlx::test(migrations = false)]
async fn the_recovery_row_tells_what_really_happened(pool: PgPool) {
    crate::common::schema(&pool).await;
    // Sent synchronously, by the request: no engine.
    let app = TestApp::desk(&pool).smtp().spawn().await;
    let smtp = app.smtp();
    smtp.fail_next(1, "554 5.7.1 relay denied");
    let cookie = app.sign_in_admin().await;

    let failed = app
        .post_form("/api/account/send_recovery", &[], Some(&cookie))
        .await;
    assert_eq!(failed.status, StatusCode::OK, "{}", failed.body);
    let failed = failed.json();
    assert_eq!(failed["sent"], false);
    assert!(
        failed["error"].as_str().unwrap().contains("relay denied"),
        "{failed}"
    );
    assert!(smtp.mails_to(OWNER).is_empty());
    let page = app.get_with_cookie("/admin/account", &cookie).await;
    assert!(page.body.contains("not sent"), "the row shows the failure");
    assert!(page.body.contains("relay denied"));

    let sent = app
        .post_form("/api/account/send_recovery", &[], Some(&cookie))
        .await
        .json();
    assert_eq!(sent["sent"], true);
    assert!(sent["error"].is_null());
    assert_eq!(smtp.mails_to(OWNER).len(), 1);
    let page = app.get_with_cookie("/admin/account", &cookie).await;
    assert!(page.body.contains("sent at"), "{}", page.body);
    assert!(page.body.contains(r#"data-testid="recovery-row""#));
}
