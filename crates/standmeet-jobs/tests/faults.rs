//! The job engine keeps its promises under faults (docs/reference/README.md#promises): no job
//! stays `running` once its holder stopped holding it, an attempt whose job was taken
//! back stops, one bad outcome holds up no other job, an admin's cancel always ends a
//! job `cancelled`, snoozes are not attempts, every delay has one cap, an attempt that
//! started counts even when its process dies, and a claim lets go of its jobs.

mod common;

use std::time::Duration;

use common::take_as_ghost;
use serde_json::json;
use sqlx::PgPool;
use standmeet_jobs::builtin::{Flaky, FlakyArgs, Noop, Sleep, SleepArgs};
use standmeet_jobs::testing::{self, Delay, MAX_DELAY, Outcome};
use standmeet_jobs::{JobContext, JobError, JobId, JobKind, JobState, Registry};
use standmeet_jobs_testkit::{
    all_completed, client, insert, job, job_of_kind, noops, quick_config, start_engine,
    test_registry, wait_for_state, wait_until,
};

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
    let first = client(pool)
        .insert_tx_with::<K>(
            &mut tx,
            &args,
            standmeet_jobs::InsertOptions {
                max_attempts: Some(2),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let mut others = Vec::new();
    for n in 0..noops {
        others.push(
            client(pool)
                .insert_tx::<Noop>(&mut tx, &json!({ "n": n }))
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
    let taken = testing::claim_as_ghost(
        &pool,
        "nobody-runs-this",
        1,
        &["system.noop".to_string()],
        engine.worker_id(),
        Duration::from_millis(500),
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
        engine.running_here() == 1
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
        engine.running_here() == 0
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
async fn a_cancel_the_attempt_never_saw_wins_over_its_retry_snooze_or_discard(pool: PgPool) {
    for (state, delay) in [
        (
            JobState::Retryable,
            Some(Delay::Backoff {
                base: Duration::from_secs(10),
            }),
        ),
        (
            JobState::Scheduled,
            Some(Delay::After(Duration::from_secs(10))),
        ),
        // A discard too: a handler's, or an outcome refused on the last attempt.
        (JobState::Discarded, None),
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
            max_attempts: 25,
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

// ---------------------------------------------------------------------------------
// An attempt that started counts; a claim lets go (docs/jobs.md).

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

#[sqlx::test]
async fn an_attempt_whose_process_died_counts_and_the_third_death_discards_the_job(pool: PgPool) {
    // The engine does not run `test.deadly` (it only counts the deaths); this test plays
    // the process that claims it and dies each time, as a handler that aborts would.
    let deadly = job_of_kind(&pool, "test.deadly", 3).await;
    let _engine = start_engine(&pool, registry(), quick_config(2)).await;
    let kinds = vec!["test.deadly".to_string()];
    // Long enough that the second claim below comes before it runs out even on a busy
    // machine (with 100 ms the rescuer sometimes counted the death first, and the job
    // was rightly taken again).
    let lease = Duration::from_secs(2);
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
    let config = standmeet_jobs::EngineConfig {
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
    let ids = client(&pool)
        .insert_many_tx::<Counted>(&mut tx, &args)
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
async fn the_one_backoff_grows_with_the_fourth_power_within_ten_percent_and_is_capped(
    pool: PgPool,
) {
    // `job_backoff`, the formula every writer of a failed attempt uses: a second as the
    // unit, a thousand draws per attempt.
    let cap_ms = MAX_DELAY.as_millis() as f64;
    for (attempt, middle) in [(0, 1.0), (1, 1.0), (2, 16.0), (3, 81.0)] {
        let (low, high): (f64, f64) = sqlx::query_as(
            "SELECT min(s), max(s) FROM (
                 SELECT extract(epoch FROM job_backoff($1, 1000, $2))::float8 AS s
                 FROM generate_series(1, 1000)) AS draws",
        )
        .bind(attempt)
        .bind(cap_ms)
        .fetch_one(&pool)
        .await
        .unwrap();
        assert!(
            low >= middle * 0.9 && high <= middle * 1.1,
            "attempt {attempt}: {low}–{high} s, not within 10 % of {middle} s"
        );
        assert!(high > low, "attempt {attempt}: jittered ({low}–{high} s)");
    }
    let capped: f64 =
        sqlx::query_scalar("SELECT extract(epoch FROM job_backoff(1000, 1000, $1))::float8")
            .bind(cap_ms)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(capped, MAX_DELAY.as_secs_f64());
}
