//! Unique jobs on a real database: one unfinished job per key, however many copies
//! insert it at once; the key free again once its job finished; a running job that
//! gives its key up when its kind says so; an operator's SQL and retry kept to the rule.

mod common;

use common::jobs::{client, finish_by_hand, job};
use serde_json::json;
use sqlx::PgPool;
use standmeet_jobs::builtin::Noop;
use standmeet_jobs::{
    InsertOptions, Inserted, JobContext, JobError, JobId, JobKind, JobState, RetryOutcome,
};

async fn insert_key(pool: &PgPool, key: &str, n: i64) -> Inserted {
    let mut conn = pool.acquire().await.unwrap();
    client(pool)
        .insert_unique_tx::<Noop>(&mut conn, &json!({ "n": n }), key, InsertOptions::default())
        .await
        .unwrap()
}

async fn jobs_with_key(pool: &PgPool, key: &str) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM jobs WHERE unique_key = $1")
        .bind(key)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Makes job `id` `running`, held by a process that is not there, as a claim's write
/// leaves it.
async fn hold_running(pool: &PgPool, id: JobId) {
    sqlx::query(
        "UPDATE jobs SET state = 'running', attempt = 1, attempted_at = now(),
                attempted_by = 'elsewhere', lease_expires_at = now() + interval '1 minute'
         WHERE id = $1",
    )
    .bind(id.0)
    .execute(pool)
    .await
    .unwrap();
}

#[sqlx::test]
async fn a_second_insert_with_a_taken_key_answers_the_first_job_and_inserts_nothing(pool: PgPool) {
    let first = insert_key(&pool, "source:1", 1).await;
    assert!(!first.duplicate);
    let second = insert_key(&pool, "source:1", 2).await;
    assert_eq!(
        second,
        Inserted {
            id: first.id,
            duplicate: true
        }
    );
    assert_eq!(jobs_with_key(&pool, "source:1").await, 1);
    assert_eq!(
        job(&pool, first.id).await.args,
        json!({"n": 1}),
        "the first one kept"
    );
    let other = insert_key(&pool, "source:2", 3).await;
    assert!(!other.duplicate, "another key is another job");
    assert_ne!(other.id, first.id);
}

#[sqlx::test]
async fn copies_inserting_one_key_at_once_make_one_job(pool: PgPool) {
    // Two "processes" (pools of their own), each with ten inserts racing, every one in
    // a transaction of its own that holds its insert a moment before committing.
    let options = pool.connect_options().as_ref().clone();
    let copies: Vec<PgPool> = futures_util::future::join_all((0..2).map(|_| {
        sqlx::postgres::PgPoolOptions::new()
            .max_connections(10)
            .connect_with(options.clone())
    }))
    .await
    .into_iter()
    .map(Result::unwrap)
    .collect();
    let start = std::sync::Arc::new(tokio::sync::Barrier::new(20));
    let mut inserts = Vec::new();
    for n in 0..20 {
        let copy = copies[n % 2].clone();
        let start = start.clone();
        inserts.push(tokio::spawn(async move {
            let mut tx = copy.begin().await.unwrap();
            start.wait().await;
            let inserted = client(&copy)
                .insert_unique_tx::<Noop>(
                    &mut tx,
                    &json!({ "n": n }),
                    "vault-rebuild",
                    InsertOptions::default(),
                )
                .await
                .unwrap();
            tokio::task::yield_now().await;
            tx.commit().await.unwrap();
            inserted
        }));
    }
    let mut answers = Vec::new();
    for insert in inserts {
        answers.push(insert.await.unwrap());
    }
    assert_eq!(jobs_with_key(&pool, "vault-rebuild").await, 1, "one job");
    let inserted: Vec<&Inserted> = answers.iter().filter(|a| !a.duplicate).collect();
    assert_eq!(inserted.len(), 1, "one insert made it: {answers:?}");
    assert!(
        answers.iter().all(|a| a.id == inserted[0].id),
        "every copy answers the same job: {answers:?}"
    );
}

#[sqlx::test]
async fn a_rolled_back_insert_leaves_the_key_free(pool: PgPool) {
    let mut tx = pool.begin().await.unwrap();
    client(&pool)
        .insert_unique_tx::<Noop>(&mut tx, &json!({}), "k", InsertOptions::default())
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    assert!(!insert_key(&pool, "k", 1).await.duplicate);
}

#[sqlx::test]
async fn once_its_job_finished_the_key_makes_a_new_job(pool: PgPool) {
    let first = insert_key(&pool, "k", 1).await;
    finish_by_hand(&pool, first.id).await;
    let second = insert_key(&pool, "k", 2).await;
    assert!(!second.duplicate);
    assert_ne!(second.id, first.id);
    // A scheduled and a retryable job hold their key as an available one does.
    sqlx::query("UPDATE jobs SET state = 'retryable', attempt = 1 WHERE id = $1")
        .bind(second.id.0)
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(insert_key(&pool, "k", 3).await.id, second.id);
}

#[sqlx::test]
async fn a_running_job_holds_its_key_unless_its_kind_lets_the_next_one_in(pool: PgPool) {
    // system.noop keeps the default: a running job holds its key.
    let held = insert_key(&pool, "noop", 1).await;
    hold_running(&pool, held.id).await;
    let again = insert_key(&pool, "noop", 2).await;
    assert_eq!((again.id, again.duplicate), (held.id, true));

    // A kind that runs again after a change that came while it ran.
    let mut conn = pool.acquire().await.unwrap();
    let running = client(&pool)
        .insert_unique_tx::<Rebuild>(&mut conn, &json!({}), "rebuild", Default::default())
        .await
        .unwrap();
    hold_running(&pool, running.id).await;
    let next = client(&pool)
        .insert_unique_tx::<Rebuild>(&mut conn, &json!({}), "rebuild", Default::default())
        .await
        .unwrap();
    assert!(!next.duplicate, "the next one goes in");
    assert_ne!(next.id, running.id);
    let was_running = job(&pool, running.id).await;
    assert_eq!(was_running.state, JobState::Running, "it runs on");
    let keys: Vec<(i64, Option<String>)> =
        sqlx::query_as("SELECT id, unique_key FROM jobs WHERE kind = 'test.rebuild' ORDER BY id")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(
        keys,
        vec![(running.id.0, None), (next.id.0, Some("rebuild".into()))],
        "the running job gave its key to the next one"
    );
    // And the next one, waiting, holds it as usual.
    let third = client(&pool)
        .insert_unique_tx::<Rebuild>(&mut conn, &json!({}), "rebuild", Default::default())
        .await
        .unwrap();
    assert_eq!((third.id, third.duplicate), (next.id, true));
}

#[sqlx::test]
async fn an_operators_insert_with_a_taken_key_is_refused_by_the_database(pool: PgPool) {
    let held = insert_key(&pool, "listings.fetch:7", 1).await;
    let err = sqlx::query(
        "INSERT INTO jobs (kind, args, unique_key) VALUES ('system.noop', '{}', 'listings.fetch:7')",
    )
    .execute(&pool)
    .await
    .unwrap_err();
    let db = err.as_database_error().expect("a database error");
    assert_eq!(
        db.code().as_deref(),
        Some("23505"),
        "unique violation: {db}"
    );
    assert_eq!(db.constraint(), Some("jobs_unique_key_idx"));
    assert_eq!(jobs_with_key(&pool, "listings.fetch:7").await, 1);
    // Once it finished, the same statement goes in.
    finish_by_hand(&pool, held.id).await;
    sqlx::query(
        "INSERT INTO jobs (kind, args, unique_key) VALUES ('system.noop', '{}', 'listings.fetch:7')",
    )
    .execute(&pool)
    .await
    .unwrap();
}

#[sqlx::test]
async fn a_retry_is_refused_while_another_job_holds_the_key(pool: PgPool) {
    let old = insert_key(&pool, "k", 1).await;
    sqlx::query("UPDATE jobs SET state = 'discarded', attempt = 1 WHERE id = $1")
        .bind(old.id.0)
        .execute(&pool)
        .await
        .unwrap();
    let new = insert_key(&pool, "k", 2).await;
    assert!(!new.duplicate);
    assert_eq!(
        client(&pool).retry(old.id).await.unwrap(),
        RetryOutcome::NotRetryable(JobState::Discarded)
    );
    assert_eq!(job(&pool, old.id).await.state, JobState::Discarded);
    finish_by_hand(&pool, new.id).await;
    assert_eq!(
        client(&pool).retry(old.id).await.unwrap(),
        RetryOutcome::Retried
    );
    assert_eq!(job(&pool, old.id).await.state, JobState::Available);
}

/// A kind whose running job gives its key to the next one (never run here).
struct Rebuild;

impl JobKind for Rebuild {
    const KIND: &'static str = "test.rebuild";
    const UNIQUE_WHILE_RUNNING: bool = false;
    type Args = serde_json::Value;
    type Output = ();

    async fn run(&self, _job: JobContext, _args: serde_json::Value) -> Result<(), JobError> {
        Ok(())
    }
}

#[sqlx::test]
async fn no_index_but_the_primary_key_has_an_entry_for_a_finished_job(pool: PgPool) {
    // Each other index's predicate names the state, and only unfinished states.
    let indexes: Vec<(String, Option<String>)> = sqlx::query_as(
        "SELECT indexrelid::regclass::text, pg_get_expr(indpred, indrelid)
         FROM pg_index WHERE indrelid = 'jobs'::regclass AND NOT indisprimary",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert!(
        indexes
            .iter()
            .any(|(name, _)| name == "jobs_unique_key_idx")
    );
    for (name, predicate) in &indexes {
        let predicate = predicate.as_deref().unwrap_or_default();
        assert!(predicate.contains("state"), "{name} holds every job");
        for finished in ["completed", "discarded", "cancelled"] {
            assert!(
                !predicate.contains(finished),
                "{name} holds {finished} jobs: {predicate}"
            );
        }
    }
}
