//! StandMeet keeps the engine's promises where people see them (docs/reference/README.md#promises):
//! a kind nobody runs waits instead of being discarded and the panel says why, every
//! code or link that went out in a mail works, secrets stay out of the process log, an
//! approved request never dead-ends, the engine gets a pool with room beyond its
//! claims, and an admin's cancel of a job a silent claim holds answers at once. (The
//! engine's own fault tests are in `crates/standmeet-jobs/tests/faults.rs`.)

use crate::common;

use std::time::Duration;

use axum::http::StatusCode;
use common::TestApp;
use common::jobs::{
    all_completed, job, job_of_kind, noops, quick_config, start_engine, test_registry,
    wait_for_state, wait_until,
};
use sqlx::PgPool;
use standmeet_jobs::{JobContext, JobError, JobId, JobKind, JobState, Registry};

fn registry() -> Registry {
    test_registry(Default::default())
}

#[sqlx::test(migrations = false)]
async fn a_job_of_a_kind_nobody_runs_waits_and_the_panel_says_why(pool: PgPool) {
    crate::common::schema(&pool).await;
    let mut app = TestApp::builder(pool.clone()).jobs().spawn().await;
    let cookie = app.sign_in_admin().await;
    let stranger: i64 = sqlx::query_scalar(
        "INSERT INTO jobs (kind, args) VALUES ('feature.of.tomorrow', '{}') RETURNING id",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    // Jobs inserted after it run; it is left for a process that knows its kind.
    let after = noops(&pool, 5).await;
    all_completed(&pool, &after).await;
    let row = job(&pool, JobId(stranger)).await;
    assert_eq!(
        row.state,
        JobState::Available,
        "never discarded for this: {row:?}"
    );
    assert_eq!(row.attempt, 0);

    let reply = app
        .get_with_cookie(&format!("/api/jobs/status?ids={stranger}"), &cookie)
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let note = reply.json()["jobs"][0]["note"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        note.contains("No running StandMeet knows this kind"),
        "{}",
        reply.body
    );
    // This process goes away before one that knows the kind comes.
    app.stop_jobs().await;

    // A process that knows the kind picks it up.
    struct Tomorrow;
    impl JobKind for Tomorrow {
        const KIND: &'static str = "feature.of.tomorrow";
        type Args = serde_json::Value;
        type Output = &'static str;
        async fn run(
            &self,
            _job: JobContext,
            _args: serde_json::Value,
        ) -> Result<&'static str, JobError> {
            Ok("done")
        }
    }
    let _newer = start_engine(&pool, registry().register(Tomorrow), quick_config(2)).await;
    wait_for_state(&pool, JobId(stranger), JobState::Completed).await;
}

// ---- Mail: every code or link that went out works; secrets stay out of the log ----

fn codes_in(mails: &[common::smtp::ReceivedMail]) -> Vec<String> {
    mails
        .iter()
        .map(|mail| {
            mail.text()
                .split_whitespace()
                .find(|word| word.len() == 14 && word.matches('-').count() == 2)
                .expect("a code in the mail")
                .to_string()
        })
        .collect()
}

async fn new_request(pool: &PgPool, email: &str) -> i64 {
    sqlx::query_scalar(
        "INSERT INTO access_requests (name, email) VALUES ('Visitor', $1) RETURNING id",
    )
    .bind(email)
    .fetch_one(pool)
    .await
    .unwrap()
}

#[sqlx::test(migrations = false)]
async fn a_code_mailed_by_an_attempt_whose_answer_was_lost_still_redeems(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::desk_with_mail(&pool).await;
    let smtp = app.smtp();
    let cookie = app.sign_in_admin().await;
    let id = new_request(&pool, "lost@example.com").await;
    // The server keeps the first mail, then drops the line: the job cannot tell.
    smtp.accept_then_drop_next(1);
    let reply = app.approve(&cookie, id).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let job_id = JobId(reply.json()["mail_job_id"].as_i64().unwrap());
    let row = wait_for_state(&pool, job_id, JobState::Completed).await;
    assert_eq!(row.attempt, 2, "the first attempt saw a failure: {row:?}");

    let codes = codes_in(&smtp.mails_to("lost@example.com"));
    assert_eq!(codes.len(), 2, "the visitor got two mails");
    assert_ne!(codes[0], codes[1]);
    let email = standmeet::types::EmailAddress::parse("lost@example.com").unwrap();
    for code in &codes {
        assert!(
            standmeet::domain::access_requests::code_matches(&app.pool, &email, code)
                .await
                .unwrap(),
            "code {code} redeems"
        );
    }
}

#[sqlx::test(migrations = false)]
async fn a_confirmation_link_mailed_by_an_attempt_whose_answer_was_lost_still_works(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::desk_with_mail(&pool).await;
    let smtp = app.smtp();
    let cookie = app.sign_in_admin().await;
    smtp.accept_then_drop_next(1);
    let reply = app
        .post_form(
            "/api/account/change_email",
            &[("new_email", "new@desk.example")],
            Some(&cookie),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    wait_until(Duration::from_secs(20), || async {
        smtp.mails_to("new@desk.example").len() == 2
    })
    .await;
    let first = smtp.mails_to("new@desk.example")[0].text();
    let start = first.find("token=").unwrap() + "token=".len();
    let token: String = first[start..]
        .chars()
        .take_while(char::is_ascii_hexdigit)
        .collect();
    // The first link (whose send looked failed) confirms the change.
    let page = app
        .post_form("/api/confirm_email", &[("token", &token)], None)
        .await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let owner = standmeet::domain::owner::owner_email(&pool, &app.state.settings)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(owner.as_str(), "new@desk.example");
}

#[tokio::test]
async fn the_log_supplier_keeps_mail_bodies_out_of_the_process_log() {
    use std::sync::{Arc, Mutex};
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_max_level(tracing::Level::TRACE)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let from = standmeet::config::MailFrom {
        name: "StandMeet".into(),
        address: standmeet::types::EmailAddress::parse("desk@example.com").unwrap(),
    };
    let mail = standmeet::domain::mail::Mail {
        to: standmeet::types::EmailAddress::parse("visitor@example.com").unwrap(),
        subject: "Your access to StandMeet".into(),
        body: "Your access code: K7QF-2MZP-9HXA".into(),
        calendar: None,
    };
    standmeet::domain::mail::Mailer::Log
        .send(&from, &mail)
        .await
        .unwrap();
    let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(
        log.contains("Your access to StandMeet"),
        "the mail is logged: {log}"
    );
    assert!(!log.contains("K7QF-2MZP-9HXA"), "but not its secret: {log}");
}

#[sqlx::test(migrations = false)]
async fn the_mail_log_shows_a_mail_only_once_it_went_out(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::desk_with_mail(&pool).await;
    let smtp = app.smtp();
    // The server holds its answer until released: the mail is on its way for as long
    // as the checks below take (was: a 1.5 s delay, and the checks skipped when the
    // mail had gone out before they ran).
    smtp.hold_answers();
    let cookie = app.sign_in_admin().await;
    let id = new_request(&pool, "slow@example.com").await;
    let reply = app.approve(&cookie, id).await;
    let job_id = JobId(reply.json()["mail_job_id"].as_i64().unwrap());
    // While the server takes its time, the mail is on its way, not sent.
    wait_until(Duration::from_secs(5), || async {
        common::count(
            &pool,
            "SELECT count(*) FROM mail_log WHERE recipient = 'slow@example.com'",
        )
        .await
            == 1
    })
    .await;
    // Running (once its claim is written, within milliseconds), not completed.
    wait_for_state(&pool, job_id, JobState::Running).await;
    let shown = standmeet::domain::mail::mail_log_newest(&pool, 50)
        .await
        .unwrap();
    assert!(
        shown
            .iter()
            .all(|mail| mail.recipient != "slow@example.com"),
        "not shown before the server took it"
    );
    smtp.release_answers();
    wait_for_state(&pool, job_id, JobState::Completed).await;
    let shown = standmeet::domain::mail::mail_log_newest(&pool, 50)
        .await
        .unwrap();
    assert!(
        shown
            .iter()
            .any(|mail| mail.recipient == "slow@example.com")
    );
}

#[sqlx::test(migrations = false)]
async fn an_approved_request_whose_mail_failed_or_vanished_can_be_approved_again(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::desk_with_mail(&pool).await;
    let smtp = app.smtp();
    let cookie = app.sign_in_admin().await;
    let id = new_request(&pool, "again@example.com").await;
    smtp.fail_next(1, "550 5.1.1 no such mailbox");
    let first = app.approve(&cookie, id).await;
    let first_job = JobId(first.json()["mail_job_id"].as_i64().unwrap());
    wait_for_state(&pool, first_job, JobState::Discarded).await;

    // Discarded: approve again queues a new mail, which goes out.
    let second = app.approve(&cookie, id).await;
    assert_eq!(second.status, StatusCode::OK, "{}", second.body);
    let second_job = JobId(second.json()["mail_job_id"].as_i64().unwrap());
    assert_ne!(first_job, second_job);
    wait_for_state(&pool, second_job, JobState::Completed).await;
    let status: String =
        sqlx::query_scalar("SELECT status::text FROM access_requests WHERE id = $1")
            .bind(id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(status, "replied");

    // Cleaned away: the same holds for a request whose mail job is gone.
    let other = new_request(&pool, "gone@example.com").await;
    smtp.fail_next(1, "550 5.1.1 no such mailbox");
    let reply = app.approve(&cookie, other).await;
    let gone = JobId(reply.json()["mail_job_id"].as_i64().unwrap());
    wait_for_state(&pool, gone, JobState::Discarded).await;
    sqlx::query("DELETE FROM jobs WHERE id = $1")
        .bind(gone.0)
        .execute(&pool)
        .await
        .unwrap();
    let again = app.approve(&cookie, other).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);

    // While a mail is on its way, a second approval is refused and queues nothing.
    // (The server holds its answer, so the mail stays on its way however long the
    // second approval takes; was: a 3 s delay.)
    smtp.hold_answers();
    let busy = new_request(&pool, "busy@example.com").await;
    app.approve(&cookie, busy).await;
    let refused = app.approve(&cookie, busy).await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.body);
    assert!(refused.body.contains("on its way"), "{}", refused.body);
    smtp.release_answers();
}

#[sqlx::test(migrations = false)]
async fn an_engine_refuses_a_pool_that_its_claims_would_use_up(pool: PgPool) {
    crate::common::schema(&pool).await;
    // StandMeet's queues, as its own registry has them.
    let app = TestApp::builder(pool.clone()).spawn().await;
    let config = standmeet_jobs::EngineConfig {
        queues: app
            .state
            .registry
            .queues()
            .map(standmeet::config::queue_config)
            .collect(),
        ..quick_config(2)
    };
    let claims: usize = config.queues.iter().map(|q| q.claims_in_flight).sum();
    let small = sqlx::postgres::PgPoolOptions::new()
        .max_connections(claims as u32)
        .connect_lazy_with((*pool.connect_options()).clone());
    let refused = standmeet_jobs::JobRuntime::start(
        &small,
        registry(),
        config.clone(),
        &common::jobs::client(&pool),
    )
    .await;
    let Err(err) = refused else {
        panic!("an engine started on {claims} connections for {claims} claims");
    };
    let words = err.to_string();
    assert!(
        words.contains(&format!("keep {claims} claims open"))
            && words.contains(&format!("at least {}", config.connections_needed())),
        "{words}"
    );
    // The pool StandMeet gives its engine leaves room beyond the claims.
    let engine_pool = standmeet::db::engine_pool(&pool, config.connections_needed());
    assert!(
        engine_pool.options().get_max_connections() > config.connections_needed(),
        "{:?}",
        engine_pool.options().get_max_connections()
    );
}

#[sqlx::test(migrations = false)]
async fn an_admins_cancel_of_a_job_a_silent_claim_holds_answers_409_within_two_seconds(
    pool: PgPool,
) {
    crate::common::schema(&pool).await;
    let id = job_of_kind(&pool, "test.held", 3).await;
    let app = TestApp::builder(pool.clone()).spawn().await;
    let cookie = common::signed_in_cookie(&app, &pool).await;
    // The claim of a process that went silent: its transaction holds the row.
    let mut silent = pool.begin().await.unwrap();
    sqlx::query("SELECT id FROM jobs WHERE id = $1 FOR UPDATE")
        .bind(id.0)
        .execute(&mut *silent)
        .await
        .unwrap();
    let id_text = id.0.to_string();
    let started = std::time::Instant::now();
    let reply = common::post_form(
        &app,
        "/api/tasks/cancel",
        &[("id", &id_text)],
        Some(&cookie),
    )
    .await;
    let took = started.elapsed();
    assert!(took < Duration::from_secs(2), "answered after {took:?}");
    assert_eq!(reply.status, StatusCode::CONFLICT, "{}", reply.body);
    assert!(reply.body.contains("not answering"), "{}", reply.body);
    silent.rollback().await.unwrap();
    // Once the holder let go, the cancel goes through.
    let reply = common::post_form(
        &app,
        "/api/tasks/cancel",
        &[("id", &id_text)],
        Some(&cookie),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(job(&pool, id).await.state, JobState::Cancelled);
}
