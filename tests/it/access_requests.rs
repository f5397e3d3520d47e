//! Access requests end to end on a real database and a real SMTP peer: the visitor's
//! form, the owner's mail, approval with its mail (and its failures), the access code,
//! the throttle, and the mail-supplier-less case.

use crate::common;

use std::time::Duration;

use axum::http::StatusCode;
use common::jobs::{wait_for_state, wait_until};
use common::{OWNER, TestApp};
use sqlx::PgPool;
use standmeet_jobs::{JobId, JobState};

/// The desk with mail going to `supplier` (`log` or `none`) and no engine.
async fn desk_mailing(pool: &PgPool, supplier: &str) -> TestApp {
    TestApp::desk(pool)
        .setting("STANDMEET_MAIL", supplier)
        .spawn()
        .await
}

async fn ask(app: &TestApp, name: &str, email: &str) -> common::Reply {
    app.post_form(
        "/api/request_access",
        &[
            ("name", name),
            ("email", email),
            ("message", "Hello, may I?"),
        ],
        None,
    )
    .await
}

async fn request_id_of(pool: &PgPool, email: &str) -> i64 {
    sqlx::query_scalar("SELECT id FROM access_requests WHERE email = $1 ORDER BY id DESC LIMIT 1")
        .bind(email)
        .fetch_one(pool)
        .await
        .unwrap()
}

async fn status_of(pool: &PgPool, id: i64) -> String {
    sqlx::query_scalar("SELECT status::text FROM access_requests WHERE id = $1")
        .bind(id)
        .fetch_one(pool)
        .await
        .unwrap()
}

async fn approval_jobs(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM jobs WHERE kind = 'access_request.approval_mail'")
        .fetch_one(pool)
        .await
        .unwrap()
}

/// The access code in a mail's text.
fn code_in(mail: &str) -> String {
    mail.split_whitespace()
        .find(|word| word.len() == 14 && word.matches('-').count() == 2)
        .expect("a code in the mail")
        .to_string()
}

#[sqlx::test(migrations = false)]
async fn a_visitors_request_is_written_and_the_owner_gets_exactly_one_mail(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::desk(&pool).smtp().jobs().spawn().await;
    let smtp = app.smtp();

    let reply = ask(&app, "Ada Lovelace", "ada@example.com").await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(reply.json(), "Request received");
    let id = request_id_of(&pool, "ada@example.com").await;
    assert_eq!(status_of(&pool, id).await, "pending");

    let job: i64 = sqlx::query_scalar("SELECT notify_job_id FROM access_requests WHERE id = $1")
        .bind(id)
        .fetch_one(&pool)
        .await
        .unwrap();
    let row = wait_for_state(&pool, JobId(job), JobState::Completed).await;
    assert_eq!(row.kind, "access_request.notify_owner");
    let mails = smtp.mails_to(OWNER);
    assert_eq!(mails.len(), 1);
    assert!(
        mails[0]
            .data
            .contains("Ada Lovelace <ada@example.com> asks for access"),
        "{}",
        mails[0].data
    );
    assert!(
        mails[0]
            .data
            .contains("http://127.0.0.1:3000/admin/access-requests")
    );
}

#[sqlx::test(migrations = false)]
async fn a_request_with_bad_fields_is_answered_field_by_field_and_writes_nothing(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = desk_mailing(&pool, "log").await;
    let reply = app
        .post_form(
            "/api/request_access",
            &[("name", " "), ("email", "nope"), ("message", "")],
            None,
        )
        .await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    let answer = reply.json();
    assert_eq!(answer["message"], "Please check the fields marked below.");
    assert_eq!(answer["name"], "Please give your name.");
    assert!(
        answer["email"].as_str().unwrap().contains("one @"),
        "{answer}"
    );
    let count = common::count(&pool, "SELECT count(*) FROM access_requests").await;
    assert_eq!(count, 0);
    let jobs = common::count(&pool, "SELECT count(*) FROM jobs").await;
    assert_eq!(jobs, 0);
}

#[sqlx::test(migrations = false)]
async fn requests_are_rate_limited_per_address(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = desk_mailing(&pool, "log").await;
    for n in 0..5 {
        let reply = ask(&app, "Visitor", &format!("visitor{n}@example.com")).await;
        assert_eq!(reply.status, StatusCode::OK, "request {n}");
    }
    let reply = ask(&app, "Visitor", "visitor6@example.com").await;
    assert_eq!(reply.status, StatusCode::TOO_MANY_REQUESTS);
    assert!(
        reply.json()["message"]
            .as_str()
            .unwrap()
            .contains("Too many requests")
    );
    let count = common::count(&pool, "SELECT count(*) FROM access_requests").await;
    assert_eq!(count, 5);
}

#[sqlx::test(migrations = false)]
async fn approval_mails_the_code_marks_replied_and_the_code_opens_access(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::desk(&pool).smtp().jobs().spawn().await;
    let smtp = app.smtp();
    let cookie = app.sign_in_admin().await;
    ask(&app, "Grace Hopper", "grace@example.com").await;
    let id = request_id_of(&pool, "grace@example.com").await;

    let reply = app.approve(&cookie, id).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let answer = reply.json();
    assert_eq!(answer["request_id"], id);
    assert_eq!(answer["status"], "approved");
    assert_eq!(answer["mail_state"], "sending");
    let job = JobId(answer["mail_job_id"].as_i64().unwrap());

    wait_for_state(&pool, job, JobState::Completed).await;
    assert_eq!(status_of(&pool, id).await, "replied");
    let mails = smtp.mails_to("grace@example.com");
    assert_eq!(mails.len(), 1, "one mail with the code");
    let code = code_in(&mails[0].data);
    let stored: String = sqlx::query_scalar("SELECT code_hash FROM access_requests WHERE id = $1")
        .bind(id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(!stored.contains(&code), "only the hash is kept");

    // A wrong code is refused; the right one opens access for this session.
    let wrong = app
        .post_form(
            "/api/redeem_access",
            &[("email", "grace@example.com"), ("code", "AAAA-BBBB-CCCC")],
            None,
        )
        .await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    assert!(
        wrong.json()["message"]
            .as_str()
            .unwrap()
            .contains("does not match")
    );
    let right = app
        .post_form(
            "/api/redeem_access",
            &[
                ("email", "Grace@Example.com"),
                ("code", &code.to_lowercase()),
            ],
            None,
        )
        .await;
    assert_eq!(right.status, StatusCode::OK, "{}", right.body);
    assert!(right.json().as_str().unwrap().starts_with("Access granted"));
    assert!(
        right.session_cookie().is_some(),
        "the session remembers the access"
    );

    // A second approval is refused with 409 and sends nothing more.
    let again = app.approve(&cookie, id).await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    assert!(again.body.contains("replied already"), "{}", again.body);
    assert_eq!(approval_jobs(&pool).await, 1);
}

#[sqlx::test(migrations = false)]
async fn replied_is_never_set_before_the_send_succeeded(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::desk(&pool).smtp().jobs().spawn().await;
    let smtp = app.smtp();
    let cookie = app.sign_in_admin().await;
    ask(&app, "Alan Turing", "alan@example.com").await;
    let id = request_id_of(&pool, "alan@example.com").await;
    // The owner's mail goes first; then the peer refuses every mail until told
    // otherwise, so no attempt can succeed while the checks below run.
    wait_until(Duration::from_secs(10), || async {
        smtp.mails_to(OWNER).len() == 1
    })
    .await;
    smtp.refuse_every_mail("451 4.3.0 mailbox busy, try later");

    let reply = app.approve(&cookie, id).await;
    let job = JobId(reply.json()["mail_job_id"].as_i64().unwrap());

    // While the attempts fail, the request stays approved and no code exists.
    let row = common::jobs::wait_for_errors(&pool, job, 2).await;
    assert_ne!(row.state, JobState::Completed, "{row:?}");
    assert_eq!(
        status_of(&pool, id).await,
        "approved",
        "not replied while the mail fails"
    );
    assert!(row.attempt_errors()[0].error.contains("451"), "{row:?}");
    assert!(
        row.attempt_errors()[0].error.contains("mailbox busy"),
        "the server's reply is kept: {row:?}"
    );

    // The server takes mail again: the next attempt sends it.
    smtp.stop_refusing();
    wait_for_state(&pool, job, JobState::Completed).await;
    assert_eq!(status_of(&pool, id).await, "replied");
    assert_eq!(smtp.mails_to("alan@example.com").len(), 1);
    let logged = common::count(
        &pool,
        "SELECT count(*) FROM mail_log WHERE recipient = 'alan@example.com'",
    )
    .await;
    assert_eq!(logged, 1, "failed sends are not logged as sent");
}

#[sqlx::test(migrations = false)]
async fn the_approval_is_watched_while_the_mail_fails(pool: PgPool) {
    crate::common::schema(&pool).await;
    // Every moment of a failing approval: the request is approved (never replied), the
    // mail job is retryable, and a permanent refusal discards it with the reply.
    let app = TestApp::desk(&pool).smtp().jobs().spawn().await;
    let smtp = app.smtp();
    let cookie = app.sign_in_admin().await;
    ask(&app, "Edsger Dijkstra", "edsger@example.com").await;
    let id = request_id_of(&pool, "edsger@example.com").await;
    wait_until(Duration::from_secs(10), || async {
        smtp.mails_to(OWNER).len() == 1
    })
    .await;
    smtp.fail_next(1, "550 5.1.1 no such mailbox");

    let reply = app.approve(&cookie, id).await;
    let job = JobId(reply.json()["mail_job_id"].as_i64().unwrap());
    let row = wait_for_state(&pool, job, JobState::Discarded).await;
    assert_eq!(row.attempt, 1, "a permanent refusal is not retried");
    assert!(row.attempt_errors()[0].error.contains("550"), "{row:?}");
    assert_eq!(status_of(&pool, id).await, "approved");
}

#[sqlx::test(migrations = false)]
async fn a_rolled_back_approval_leaves_no_job_and_no_change(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = desk_mailing(&pool, "log").await;
    let cookie = app.sign_in_admin().await;
    ask(&app, "Barbara Liskov", "barbara@example.com").await;
    let id = request_id_of(&pool, "barbara@example.com").await;
    // Make the approval's last write fail, after its job was inserted.
    sqlx::raw_sql(
        "CREATE FUNCTION refuse_decisions() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN IF NEW.status = 'approved' THEN RAISE EXCEPTION 'refused by the test'; END IF; RETURN NEW; END $$;
         CREATE TRIGGER refuse_decisions BEFORE UPDATE ON access_requests FOR EACH ROW EXECUTE FUNCTION refuse_decisions();",
    )
    .execute(&pool)
    .await
    .unwrap();

    let reply = app.approve(&cookie, id).await;
    assert!(reply.status.is_server_error(), "{}", reply.status);
    assert!(
        !reply.body.contains("refused by the test"),
        "no internals reach the client: {}",
        reply.body
    );
    assert_eq!(
        approval_jobs(&pool).await,
        0,
        "the job rolled back with the approval"
    );
    assert_eq!(status_of(&pool, id).await, "pending");
}

#[sqlx::test(migrations = false)]
async fn without_a_mail_supplier_approve_answers_400_and_changes_nothing(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = desk_mailing(&pool, "none").await;
    let cookie = app.sign_in_admin().await;
    ask(&app, "Ken Thompson", "ken@example.com").await;
    let id = request_id_of(&pool, "ken@example.com").await;
    let jobs_before = common::count(&pool, "SELECT count(*) FROM jobs").await;

    let reply = app.approve(&cookie, id).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert!(
        reply.body.contains("No mail supplier is configured"),
        "{}",
        reply.body
    );
    assert_eq!(status_of(&pool, id).await, "pending");
    let jobs_after = common::count(&pool, "SELECT count(*) FROM jobs").await;
    assert_eq!(jobs_after, jobs_before, "nothing enqueued");
}

#[sqlx::test(migrations = false)]
async fn deny_and_unknown_requests(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = desk_mailing(&pool, "log").await;
    let cookie = app.sign_in_admin().await;
    ask(&app, "Dennis Ritchie", "dennis@example.com").await;
    let id = request_id_of(&pool, "dennis@example.com").await;
    let reply = app.deny(&cookie, id).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(status_of(&pool, id).await, "denied");
    let approve = app.approve(&cookie, id).await;
    assert_eq!(approve.status, StatusCode::CONFLICT);
    let unknown = app.approve(&cookie, 987654).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert!(
        unknown.body.contains("There is no access request 987654"),
        "{}",
        unknown.body
    );
}

#[sqlx::test(migrations = false)]
async fn the_throttle_snoozes_the_sixth_mail_to_one_recipient(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::desk(&pool).smtp().jobs().spawn().await;
    let smtp = app.smtp();
    // Six requests from six addresses (a router with fresh rate limits each): six
    // mails to the one owner.
    let mut notify_jobs = Vec::new();
    for n in 0..6 {
        let email = format!("guest{n}@example.com");
        let router = app.fresh_router();
        common::post_form(
            &router,
            "/api/request_access",
            &[("name", "Guest"), ("email", &email), ("message", "")],
            None,
        )
        .await;
        let id: i64 =
            sqlx::query_scalar("SELECT notify_job_id FROM access_requests WHERE email = $1")
                .bind(&email)
                .fetch_one(&pool)
                .await
                .unwrap();
        notify_jobs.push(JobId(id));
    }
    wait_until(Duration::from_secs(15), || async {
        smtp.mails_to(OWNER).len() == 5
    })
    .await;
    // The sixth waits its turn: scheduled for later, no error, not dropped.
    wait_until(Duration::from_secs(15), || async {
        let mut scheduled = 0;
        for id in &notify_jobs {
            if common::jobs::job(&pool, *id).await.state == JobState::Scheduled {
                scheduled += 1;
            }
        }
        scheduled == 1
    })
    .await;
    let snoozed = {
        let mut found = None;
        for id in &notify_jobs {
            let row = common::jobs::job(&pool, *id).await;
            if row.state == JobState::Scheduled {
                found = Some(row);
            }
        }
        found.unwrap()
    };
    assert!(
        snoozed.attempt_errors().is_empty(),
        "a snooze is not a failure"
    );
    assert!(
        snoozed.scheduled_at > time::OffsetDateTime::now_utc() + Duration::from_secs(3000),
        "about an hour later"
    );
    assert_eq!(smtp.mails_to(OWNER).len(), 5);
}

#[sqlx::test(migrations = false)]
async fn the_log_supplier_keeps_the_mail_for_the_mail_log_page(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::desk(&pool)
        .setting("STANDMEET_MAIL", "log")
        .jobs()
        .spawn()
        .await;
    let cookie = app.sign_in_admin().await;
    ask(&app, "Margaret Hamilton", "margaret@example.com").await;
    let id = request_id_of(&pool, "margaret@example.com").await;
    let reply = app.approve(&cookie, id).await;
    let job = JobId(reply.json()["mail_job_id"].as_i64().unwrap());
    wait_for_state(&pool, job, JobState::Completed).await;

    let page = app.get_with_cookie("/admin/mail", &cookie).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("margaret@example.com"));
    assert!(page.body.contains("Your access to StandMeet"));
    assert!(
        page.body.contains("Your access code"),
        "the body is shown for the log supplier"
    );
}

#[sqlx::test(migrations = false)]
async fn the_admin_page_lists_requests_with_status_and_mail_chips(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = desk_mailing(&pool, "log").await;
    let cookie = app.sign_in_admin().await;
    ask(&app, "Linus Torvalds", "linus@example.com").await;
    let id = request_id_of(&pool, "linus@example.com").await;
    app.approve(&cookie, id).await;

    let page = app.get_with_cookie("/admin/access-requests", &cookie).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        page.body.contains(&format!(
            r#"data-testid="access-request-row" data-request-id="{id}""#
        )),
        "{}",
        page.body
    );
    assert!(
        page.body
            .contains(r#"data-testid="request-status" data-state="approved""#)
    );
    assert!(
        page.body
            .contains(r#"data-testid="request-mail-state" data-state="sending""#)
    );

    let pending_only = app
        .get_with_cookie("/admin/access-requests?status=pending", &cookie)
        .await;
    assert!(
        !pending_only
            .body
            .contains(r#"data-testid="access-request-row""#)
    );
}

#[sqlx::test(migrations = false)]
async fn wrong_codes_from_one_address_do_not_lock_the_visitor_out(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = desk_mailing(&pool, "log").await;
    sqlx::query(
        "INSERT INTO access_requests (name, email, status, code_hash, replied_at) \
         VALUES ('Ada', 'ada@example.com', 'replied', $1, now())",
    )
    .bind(standmeet::domain::secrets::code_hash("K7QF-2MZP-9HXA"))
    .execute(&pool)
    .await
    .unwrap();
    // Someone guesses Ada's code from one address (the in-process client) until refused.
    let mut statuses = Vec::new();
    for n in 0..12 {
        let reply = app
            .post_form(
                "/api/redeem_access",
                &[
                    ("email", "ada@example.com"),
                    ("code", &format!("AAAA-BBBB-{n:04}")),
                ],
                None,
            )
            .await;
        statuses.push(reply.status);
    }
    assert_eq!(
        statuses[..10],
        [StatusCode::UNAUTHORIZED; 10],
        "{statuses:?}"
    );
    assert_eq!(
        statuses[10..],
        [StatusCode::TOO_MANY_REQUESTS; 2],
        "{statuses:?}"
    );
    // Ada, from her own address (a real connection from loopback), still gets in.
    let reply = reqwest::Client::new()
        .post(app.url("/api/redeem_access"))
        .header("sec-fetch-site", "same-origin")
        .header("accept", "application/json")
        .form(&[("email", "ada@example.com"), ("code", "K7QF-2MZP-9HXA")])
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), reqwest::StatusCode::OK);
}

/// Posts a form as a browser does with JavaScript off: `Accept: text/html`, from the
/// page at `referer`.
async fn post_as_plain_html(
    app: &TestApp,
    path: &str,
    pairs: &[(&str, &str)],
    referer: &str,
    cookie: Option<&str>,
) -> common::Reply {
    let mut body = url::form_urlencoded::Serializer::new(String::new());
    for (name, value) in pairs {
        body.append_pair(name, value);
    }
    let mut request = axum::http::Request::post(path)
        .header("content-type", "application/x-www-form-urlencoded")
        .header("accept", "text/html,application/xhtml+xml,*/*;q=0.8")
        .header("referer", format!("http://localhost{referer}"))
        .header("sec-fetch-site", "same-origin");
    if let Some(cookie) = cookie {
        request = request.header("cookie", cookie);
    }
    app.send(request.body(axum::body::Body::from(body.finish())).unwrap())
        .await
}

/// The page a redirect points at, as the browser then asks for it.
async fn follow(app: &TestApp, reply: &common::Reply, cookie: Option<&str>) -> common::Reply {
    assert_eq!(reply.status, StatusCode::FOUND, "{}", reply.body);
    let location = reply.location().expect("a Location");
    let path = location
        .strip_prefix("http://localhost")
        .unwrap_or(location);
    match cookie {
        Some(cookie) => app.get_with_cookie(path, cookie).await,
        None => app.get(path).await,
    }
}

#[sqlx::test(migrations = false)]
async fn without_javascript_the_visitor_forms_post_and_answer_with_a_page_in_words(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::desk(&pool).smtp().jobs().spawn().await;
    let smtp = app.smtp();

    // A request with a bad email comes back to the form, saying what to fix; none is kept.
    let refused = post_as_plain_html(
        &app,
        "/api/request_access",
        &[
            ("name", "Ada"),
            ("email", "not an address"),
            ("message", "Hello"),
        ],
        "/request-access",
        None,
    )
    .await;
    let page = follow(&app, &refused, None).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        page.body.contains("Please check the fields marked below."),
        "{}",
        page.body
    );
    assert!(!page.body.contains("Request received"));
    assert_eq!(
        common::count(&pool, "SELECT count(*) FROM access_requests").await,
        0
    );

    // A good one is kept, and the page it lands on says it was received.
    let sent = post_as_plain_html(
        &app,
        "/api/request_access",
        &[
            ("name", "Ada Lovelace"),
            ("email", "ada@example.com"),
            ("message", "Hello"),
        ],
        "/request-access",
        None,
    )
    .await;
    assert_eq!(sent.location(), Some("/request-access?received"));
    let page = follow(&app, &sent, None).await;
    assert!(page.body.contains("Request received"), "{}", page.body);
    let id = request_id_of(&pool, "ada@example.com").await;

    // The owner approves; the visitor enters the code without JavaScript.
    let cookie = app.sign_in_admin().await;
    let answer = app.approve(&cookie, id).await.json();
    wait_for_state(
        &pool,
        JobId(answer["mail_job_id"].as_i64().unwrap()),
        JobState::Completed,
    )
    .await;
    let code = code_in(&smtp.mails_to("ada@example.com")[0].data);

    let wrong = post_as_plain_html(
        &app,
        "/api/redeem_access",
        &[("email", "ada@example.com"), ("code", "AAAA-BBBB-CCCC")],
        "/access",
        None,
    )
    .await;
    let page = follow(&app, &wrong, None).await;
    assert!(page.body.contains("does not match"), "{}", page.body);
    assert!(!page.body.contains("Access granted"));

    let right = post_as_plain_html(
        &app,
        "/api/redeem_access",
        &[("email", "ada@example.com"), ("code", &code)],
        "/access",
        None,
    )
    .await;
    assert_eq!(right.location(), Some("/access"));
    let visitor = right
        .session_cookie()
        .expect("the session that holds the access");
    let page = follow(&app, &right, Some(&visitor)).await;
    assert!(page.body.contains("Access granted"), "{}", page.body);
    // The words come from the session, not the address: another visitor's /access
    // does not say so.
    assert!(!app.get("/access").await.body.contains("Access granted"));
}
