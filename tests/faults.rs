//! The job engine keeps its promises under faults (product contract §2): no job stays
//! `running` once its holder stopped holding it, an attempt whose job was taken back
//! stops, one bad outcome holds up no other job, an admin's cancel always ends a job
//! `cancelled`, snoozes are not attempts, every delay has one cap, a kind nobody runs
//! waits instead of being discarded, every code or link that went out in a mail works,
//! secrets stay out of the process log, and an approved request never dead-ends.

mod common;

use std::time::Duration;

use axum::http::StatusCode;
use common::TestApp;
use common::jobs::{
    job, quick_config, start_engine, take_as_ghost, test_registry, wait_for_state, wait_until,
};
use serde_json::json;
use sqlx::PgPool;
use standmeet::jobs::builtin::{Flaky, FlakyArgs, Noop, Sleep, SleepArgs};
use standmeet::jobs::testing::{self, MAX_DELAY, Outcome};
use standmeet::jobs::{JobContext, JobError, JobId, JobKind, JobState, Registry, insert};

fn registry() -> Registry {
    test_registry(Default::default()).register(Dirty)
}

/// `test.dirty {in}`: fails (`in: "error"`) or completes (`in: "output"`) with text that
/// carries NUL characters and is far too long, as a feed or a remote error might.
struct Dirty;

impl JobKind for Dirty {
    const KIND: &'static str = "test.dirty";
    const MAX_ATTEMPTS: i16 = 1;
    type Args = serde_json::Value;
    type Output = serde_json::Value;

    async fn run(
        &self,
        _job: JobContext,
        args: serde_json::Value,
    ) -> Result<serde_json::Value, JobError> {
        let dirty = format!("bad\0byte {}", "x".repeat(10_000));
        match args["in"].as_str() {
            Some("error") => Err(JobError::discard(dirty)),
            _ => Ok(json!({ "text": dirty, "ke\0y": 1 })),
        }
    }
}

async fn noops(pool: &PgPool, count: usize) -> Vec<JobId> {
    let mut ids = Vec::new();
    for n in 0..count {
        ids.push(insert::<Noop>(pool, &json!({ "n": n })).await.unwrap());
    }
    ids
}

async fn all_completed(pool: &PgPool, ids: &[JobId]) {
    for id in ids {
        wait_for_state(pool, *id, JobState::Completed).await;
    }
}

#[sqlx::test]
async fn an_absurd_retry_delay_is_capped_and_holds_up_no_other_job(pool: PgPool) {
    let _engine = start_engine(&pool, registry(), quick_config(4)).await;
    // The repro from the issue: once this made every outcome batch fail ("interval out
    // of range") and left the jobs after it `running`.
    let flaky: i64 = sqlx::query_scalar(
        "INSERT INTO jobs (kind, args) VALUES ('system.flaky', \
         '{\"fail_until_attempt\":2,\"retry_in_ms\":9000000000000000000}') RETURNING id",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    let others = noops(&pool, 50).await;
    all_completed(&pool, &others).await;

    let row = wait_for_state(&pool, JobId(flaky), JobState::Retryable).await;
    let wait = row.scheduled_at - time::OffsetDateTime::now_utc();
    assert!(
        wait <= MAX_DELAY + Duration::from_secs(60) && wait > MAX_DELAY - Duration::from_secs(60),
        "the delay is capped at a week: {wait}"
    );
}

#[sqlx::test]
async fn errors_and_outputs_with_nul_characters_are_stored_cleaned_and_capped(pool: PgPool) {
    let _engine = start_engine(&pool, registry(), quick_config(4)).await;
    let failing = insert::<Dirty>(&pool, &json!({"in": "error"}))
        .await
        .unwrap();
    let completing = insert::<Dirty>(&pool, &json!({"in": "output"}))
        .await
        .unwrap();
    let others = noops(&pool, 20).await;

    let row = wait_for_state(&pool, failing, JobState::Discarded).await;
    let error = &row.attempt_errors()[0].error;
    assert!(error.starts_with("badbyte "), "{error:.40}");
    assert_eq!(
        error.chars().count(),
        testing::MAX_ERROR_CHARS + 1,
        "capped, with an ellipsis"
    );
    let row = wait_for_state(&pool, completing, JobState::Completed).await;
    let output = row.output.unwrap();
    assert!(output["text"].as_str().unwrap().starts_with("badbyte "));
    assert_eq!(output["key"], 1);
    all_completed(&pool, &others).await;
}

/// Inserts, in one transaction, a `K` job with `args` and two attempts, and `noops`
/// no-op jobs after it; answers the first and the others.
async fn one_of_two_attempts_among_noops<K: JobKind<Args = serde_json::Value>>(
    pool: &PgPool,
    args: serde_json::Value,
    noops: usize,
) -> (JobId, Vec<JobId>) {
    let mut tx = pool.begin().await.unwrap();
    let first = standmeet::jobs::insert_with::<K>(
        &mut *tx,
        &args,
        standmeet::jobs::InsertOptions {
            max_attempts: Some(2),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let mut others = Vec::new();
    for n in 0..noops {
        others.push(
            standmeet::jobs::insert_tx::<Noop>(&mut tx, &json!({ "n": n }))
                .await
                .unwrap(),
        );
    }
    tx.commit().await.unwrap();
    (first, others)
}

#[sqlx::test]
async fn an_outcome_the_database_refuses_becomes_a_failed_attempt_and_poisons_no_other(
    pool: PgPool,
) {
    // A row the database refuses to complete, whatever the engine does (class 22).
    sqlx::raw_sql(
        "CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
           IF NEW.state = 'completed' AND NEW.args ? 'poison' THEN
             RAISE EXCEPTION 'this row cannot be completed' USING ERRCODE = '22023';
           END IF;
           RETURN NEW;
         END $$;
         CREATE TRIGGER refuse_poison BEFORE UPDATE ON jobs FOR EACH ROW EXECUTE FUNCTION refuse_poison();",
    )
    .execute(&pool)
    .await
    .unwrap();
    // Held back until every job is in, so that they share outcome batches.
    let (poison, others) =
        one_of_two_attempts_among_noops::<Noop>(&pool, json!({"poison": true}), 200).await;
    let _engine = start_engine(&pool, registry(), quick_config(8)).await;

    all_completed(&pool, &others).await;
    let row = wait_for_state(&pool, poison, JobState::Discarded).await;
    assert_eq!(
        row.attempt, 2,
        "each attempt counted, then discarded: {row:?}"
    );
    let error = &row.attempt_errors()[0].error;
    assert!(error.contains("could not be recorded"), "{error}");
    assert!(error.contains("this row cannot be completed"), "{error}");
}

#[sqlx::test]
async fn a_job_under_this_processs_name_that_it_does_not_run_is_not_kept_alive(pool: PgPool) {
    let engine = start_engine(&pool, registry(), quick_config(4)).await;
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO jobs (kind, queue, args) VALUES ('system.noop', 'nobody-runs-this', '{}') RETURNING id",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    // Marked running under this process's worker id, as a lost outcome leaves a job,
    // but with no attempt in flight: renewal must not keep its lease alive.
    let taken = testing::job_fetch_available(
        &pool,
        "nobody-runs-this",
        1,
        engine.worker_id(),
        Duration::from_millis(500),
        &["system.noop".to_string()],
    )
    .await
    .unwrap();
    assert_eq!(taken.len(), 1);
    // The rescuer takes it back once the lease runs out (then it waits in its queue).
    wait_until(Duration::from_secs(10), || async {
        !job(&pool, JobId(id)).await.attempt_errors().is_empty()
    })
    .await;
    let row = job(&pool, JobId(id)).await;
    assert_ne!(row.state, JobState::Running);
    assert!(
        row.attempt_errors()[0].error.starts_with("worker lost"),
        "{row:?}"
    );
}

#[sqlx::test]
async fn an_attempt_whose_job_was_taken_back_stops_and_writes_nothing(pool: PgPool) {
    let engine = start_engine(&pool, registry(), quick_config(4)).await;
    let id = insert::<Sleep>(&pool, &SleepArgs { ms: 60_000 })
        .await
        .unwrap();
    wait_for_state(&pool, id, JobState::Running).await;
    wait_until(Duration::from_secs(5), || async {
        engine.signals.running_count() == 1
    })
    .await;
    // Another process's rescuer takes it back (its lease looked expired to it).
    sqlx::query(
        "UPDATE jobs SET state = 'retryable', attempted_by = NULL, lease_expires_at = NULL, \
         scheduled_at = now() + interval '1 hour' WHERE id = $1",
    )
    .bind(id.0)
    .execute(&pool)
    .await
    .unwrap();
    // The lease renewal (every third of the 1 s lease) finds out and stops the attempt.
    wait_until(Duration::from_secs(5), || async {
        engine.signals.running_count() == 0
    })
    .await;
    let row = job(&pool, id).await;
    assert_eq!(row.state, JobState::Retryable);
    assert!(
        row.attempt_errors().is_empty(),
        "the stopped attempt wrote nothing: {row:?}"
    );
}

#[sqlx::test]
async fn a_cancel_the_attempt_never_saw_wins_over_its_retry_or_snooze(pool: PgPool) {
    for (state, delay) in [
        (JobState::Retryable, Some(Duration::from_secs(10))),
        (JobState::Scheduled, Some(Duration::from_secs(10))),
    ] {
        let id = insert::<Noop>(&pool, &json!({})).await.unwrap();
        assert_eq!(take_as_ghost(&pool, "system.noop").await, 1);
        // The admin's cancel request lands; its notification is lost.
        sqlx::query("UPDATE jobs SET cancel_requested_at = now() WHERE id = $1")
            .bind(id.0)
            .execute(&pool)
            .await
            .unwrap();
        let outcome = Outcome {
            id,
            attempt: 1,
            state,
            output: None,
            error: Some("failed meanwhile".into()),
            delay,
            give_back_attempt: state == JobState::Scheduled,
        };
        let changed = testing::job_record_outcomes(&pool, "ghost", &[outcome], &[])
            .await
            .unwrap();
        assert_eq!(
            changed.iter().map(|job| job.id).collect::<Vec<_>>(),
            vec![id]
        );
        let row = job(&pool, id).await;
        assert_eq!(row.state, JobState::Cancelled, "{row:?}");
        assert!(row.finalized_at.is_some());
    }
}

#[sqlx::test]
async fn the_rescuers_backoff_has_the_same_cap(pool: PgPool) {
    let id = insert::<Noop>(&pool, &json!({})).await.unwrap();
    assert_eq!(take_as_ghost(&pool, "system.noop").await, 1);
    sqlx::query(
        "UPDATE jobs SET attempt = 30000, max_attempts = 32000, \
         lease_expires_at = now() - interval '1 second' WHERE id = $1",
    )
    .bind(id.0)
    .execute(&pool)
    .await
    .unwrap();
    let rescued = testing::job_rescue_expired(&pool, 10, Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(rescued, 1);
    let row = job(&pool, id).await;
    assert_eq!(row.state, JobState::Retryable);
    assert!(
        row.scheduled_at <= time::OffsetDateTime::now_utc() + MAX_DELAY + Duration::from_secs(60)
    );
}

#[sqlx::test]
async fn a_snooze_then_a_failure_backs_off_as_a_first_failure(pool: PgPool) {
    let _engine = start_engine(&pool, registry(), quick_config(4)).await;
    // Throttled 30 times (a busy recipient), then one real failure: the backoff is the
    // first attempt's (10 ms here), not the 31st's (days).
    let id = insert::<common::jobs::Actions>(&pool, &json!({"action": "snooze", "snoozes": 30}))
        .await
        .unwrap();
    let row = wait_for_state(&pool, id, JobState::Completed).await;
    assert_eq!(row.attempt, 1);
    let flaky = insert::<Flaky>(
        &pool,
        &FlakyArgs {
            fail_until_attempt: 2,
            message: None,
            retry_in_ms: None,
        },
    )
    .await
    .unwrap();
    let row = wait_for_state(&pool, flaky, JobState::Completed).await;
    assert_eq!(row.attempt, 2);
}

#[sqlx::test]
async fn a_job_of_a_kind_nobody_runs_waits_and_the_panel_says_why(pool: PgPool) {
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

#[sqlx::test]
async fn a_code_mailed_by_an_attempt_whose_answer_was_lost_still_redeems(pool: PgPool) {
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

#[sqlx::test]
async fn a_confirmation_link_mailed_by_an_attempt_whose_answer_was_lost_still_works(pool: PgPool) {
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

    let from = standmeet::types::EmailAddress::parse("desk@example.com").unwrap();
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

#[sqlx::test]
async fn the_mail_log_shows_a_mail_only_once_it_went_out(pool: PgPool) {
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

#[sqlx::test]
async fn an_approved_request_whose_mail_failed_or_vanished_can_be_approved_again(pool: PgPool) {
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

// ---------------------------------------------------------------------------------
// An attempt that started counts; a claim lets go (product contract §13).

/// `test.counted {wait?}`: leaves one row in `attempts_run` per attempt (committed at
/// once, outside the job's own writes: a side effect, like a mail), then completes, or
/// with `wait` runs until it is stopped.
struct Counted;

impl JobKind for Counted {
    const KIND: &'static str = "test.counted";
    type Args = serde_json::Value;
    type Output = serde_json::Value;

    async fn run(
        &self,
        job: JobContext,
        args: serde_json::Value,
    ) -> Result<serde_json::Value, JobError> {
        sqlx::query("INSERT INTO attempts_run (job, attempt) VALUES ($1, $2)")
            .bind(job.id.0)
            .bind(job.attempt)
            .execute(job.pool())
            .await?;
        if args["wait"].as_bool() == Some(true) {
            job.cancelled().await;
            return Err(JobError::retry("stopped"));
        }
        Ok(json!({ "attempt": job.attempt }))
    }
}

async fn create_attempts_run(pool: &PgPool) {
    sqlx::query("CREATE TABLE attempts_run (job bigint NOT NULL, attempt smallint NOT NULL)")
        .execute(pool)
        .await
        .unwrap();
}

async fn attempts_run(pool: &PgPool, id: JobId) -> Vec<i16> {
    sqlx::query_scalar("SELECT attempt FROM attempts_run WHERE job = $1 ORDER BY attempt")
        .bind(id.0)
        .fetch_all(pool)
        .await
        .unwrap()
}

/// A job of a kind no engine here runs, inserted by plain SQL with `max_attempts`.
async fn job_of_kind(pool: &PgPool, kind: &str, max_attempts: i16) -> JobId {
    JobId(
        sqlx::query_scalar(
            "INSERT INTO jobs (kind, args, max_attempts) VALUES ($1, '{}', $2) RETURNING id",
        )
        .bind(kind)
        .bind(max_attempts)
        .fetch_one(pool)
        .await
        .unwrap(),
    )
}

#[sqlx::test]
async fn an_attempt_whose_process_died_counts_and_the_third_death_discards_the_job(pool: PgPool) {
    // The engine does not run `test.deadly` (it only counts the deaths); this test plays
    // the process that claims it and dies each time, as a handler that aborts would.
    let deadly = job_of_kind(&pool, "test.deadly", 3).await;
    let _engine = start_engine(&pool, registry(), quick_config(2)).await;
    let kinds = vec!["test.deadly".to_string()];
    let lease = Duration::from_millis(100);
    for death in 1..=3_i16 {
        wait_for_state(&pool, deadly, JobState::Available).await;
        let taken = testing::claim_and_die(&pool, "default", 10, &kinds, "doomed", lease)
            .await
            .unwrap();
        assert_eq!(taken, vec![deadly], "death {death}");
        // Until the rescuer has counted the attempt, no claim takes the job again.
        let again = testing::claim_and_die(&pool, "default", 10, &kinds, "doomed", lease)
            .await
            .unwrap();
        assert!(again.is_empty(), "taken again before it was counted");
        wait_until(Duration::from_secs(10), || async {
            job(&pool, deadly).await.attempt == death
        })
        .await;
    }
    let row = wait_for_state(&pool, deadly, JobState::Discarded).await;
    assert_eq!(row.attempt, 3, "{row:?}");
    let errors = row.attempt_errors();
    assert_eq!(errors.len(), 3, "{errors:?}");
    for (n, error) in errors.iter().enumerate() {
        assert_eq!(error.attempt, n as i16 + 1);
        assert!(
            error.error.contains("died or lost the database during it")
                && error.error.contains("doomed"),
            "{}",
            error.error
        );
    }
    // The rest of the queue ran on meanwhile.
    let others = noops(&pool, 5).await;
    all_completed(&pool, &others).await;
}

#[sqlx::test]
async fn a_claim_whose_connection_breaks_records_its_attempts_once_and_cancels_still_reach_them(
    pool: PgPool,
) {
    create_attempts_run(&pool).await;
    // The claim stays open while its attempts run (a window far longer than they take).
    let config = standmeet::jobs::EngineConfig {
        claim_window: Duration::from_secs(5),
        ..quick_config(8)
    };
    let engine = start_engine(&pool, registry().register(Counted), config).await;
    let mut tx = pool.begin().await.unwrap();
    let args = [
        json!({}),
        json!({}),
        json!({ "wait": true }),
        json!({ "wait": true }),
    ];
    let ids = standmeet::jobs::insert_many_tx::<Counted>(&mut tx, &args)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let (quick, waiting) = ids.split_at(2);
    // Every attempt started (the quick ones also ended) inside the one open claim.
    wait_until(Duration::from_secs(10), || async {
        common::count(&pool, "SELECT count(*) FROM attempts_run").await == 4
    })
    .await;
    // The claim's connection breaks before it is written.
    let ended: i64 = sqlx::query_scalar(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
         WHERE datname = current_database() AND state = 'idle in transaction'
           AND query LIKE '%ORDER BY priority, scheduled_at, id%FOR UPDATE SKIP LOCKED%'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(ended >= 1, "no claim was open");

    // The ended attempts are recorded, not run again; the others run on, `running`.
    for id in quick {
        let row = wait_for_state(&pool, *id, JobState::Completed).await;
        assert_eq!(row.attempt, 1, "{row:?}");
        assert_eq!(attempts_run(&pool, *id).await, vec![1], "job {id}");
    }
    for id in waiting {
        let row = wait_for_state(&pool, *id, JobState::Running).await;
        assert_eq!(row.attempt, 1, "{row:?}");
        assert_eq!(row.attempted_by.as_deref(), Some(engine.worker_id()));
    }
    // An admin's cancel reaches the attempts that run on.
    let client = common::jobs::client(&pool);
    for id in waiting {
        client.cancel(*id).await.unwrap();
    }
    for id in waiting {
        let row = wait_for_state(&pool, *id, JobState::Cancelled).await;
        assert_eq!(row.attempt, 1, "{row:?}");
        assert_eq!(attempts_run(&pool, *id).await, vec![1], "job {id}");
    }
    assert_eq!(
        common::count(&pool, "SELECT count(*) FROM job_claims").await,
        0,
        "the claim's trace went with its second write"
    );
}

/// Makes the database refuse to store an output for `kind` with SQLSTATE `code`, as an
/// output over a limit (54000) or a role's statement timeout (57014) would.
async fn refuse_outputs_of(pool: &PgPool, kind: &str, code: &str) {
    sqlx::raw_sql(&format!(
        "CREATE FUNCTION refuse_output() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
           IF NEW.kind = '{kind}' AND NEW.output IS NOT NULL THEN
             RAISE EXCEPTION 'this output cannot be stored' USING ERRCODE = '{code}';
           END IF;
           RETURN NEW;
         END $$;
         CREATE TRIGGER refuse_output BEFORE UPDATE ON jobs FOR EACH ROW EXECUTE FUNCTION refuse_output();"
    ))
    .execute(pool)
    .await
    .unwrap();
}

async fn a_write_refused_with(pool: PgPool, code: &str) {
    refuse_outputs_of(&pool, "test.counted", code).await;
    create_attempts_run(&pool).await;
    let (refused, others) = one_of_two_attempts_among_noops::<Counted>(&pool, json!({}), 50).await;
    let _engine = start_engine(&pool, registry().register(Counted), quick_config(8)).await;

    all_completed(&pool, &others).await;
    let row = wait_for_state(&pool, refused, JobState::Discarded).await;
    assert_eq!(row.attempt, 2, "each attempt counted: {row:?}");
    assert_eq!(
        attempts_run(&pool, refused).await,
        vec![1, 2],
        "run once per attempt"
    );
    let error = &row.attempt_errors()[0].error;
    assert!(error.contains("could not be recorded"), "{error}");
}

#[sqlx::test]
async fn an_outcome_over_a_database_limit_is_a_failed_attempt_not_a_rerun_forever(pool: PgPool) {
    a_write_refused_with(pool, "54000").await;
}

#[sqlx::test]
async fn an_outcome_whose_write_times_out_every_time_is_a_failed_attempt_not_a_rerun_forever(
    pool: PgPool,
) {
    a_write_refused_with(pool, "57014").await;
}

#[sqlx::test]
async fn an_engine_refuses_a_pool_that_its_claims_would_use_up(pool: PgPool) {
    let config = standmeet::jobs::EngineConfig {
        queues: standmeet::jobs::EngineConfig::standard_queues(),
        ..quick_config(2)
    };
    let claims: usize = config.queues.iter().map(|q| q.claims_in_flight).sum();
    let small = sqlx::postgres::PgPoolOptions::new()
        .max_connections(claims as u32)
        .connect_lazy_with((*pool.connect_options()).clone());
    let refused = standmeet::jobs::JobRuntime::start(
        &small,
        registry(),
        config.clone(),
        standmeet::jobs::Signals::new(4),
    )
    .await;
    let Err(err) = refused else {
        panic!("an engine started on {claims} connections for {claims} claims");
    };
    let words = err.to_string();
    assert!(
        words.contains(&format!("keep {claims} claims open"))
            && words.contains(&format!(
                "at least {}",
                standmeet::jobs::connections_needed(&config)
            )),
        "{words}"
    );
    // The pool StandMeet gives its engine leaves room beyond the claims.
    let engine_pool =
        standmeet::db::engine_pool(&pool, standmeet::jobs::connections_needed(&config));
    assert!(
        engine_pool.options().get_max_connections() > standmeet::jobs::connections_needed(&config),
        "{:?}",
        engine_pool.options().get_max_connections()
    );
}

#[sqlx::test]
async fn an_admins_cancel_of_a_job_a_silent_claim_holds_answers_409_within_two_seconds(
    pool: PgPool,
) {
    let id = job_of_kind(&pool, "test.held", 3).await;
    let app = common::app(pool.clone());
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
