//! What the engine's tests share: the test kit (`jobs`), and the steps of a worker that
//! only the `testing` feature opens.
#![allow(dead_code)]

use std::time::Duration;

use sqlx::PgPool;

/// The engine with quick timings, the test kinds, waiting for a job's state.
pub mod jobs {
    pub use standmeet_jobs_testkit::*;
}

/// The one number `sql` answers.
pub async fn count(pool: &PgPool, sql: &str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(pool).await.unwrap()
}

/// Claims the next available job of `kind` on the `default` queue as worker "ghost",
/// which writes it `running` and will never report back: the state a process leaves
/// behind when it dies mid-attempt. Answers how many it took (0 or 1).
pub async fn take_as_ghost(pool: &PgPool, kind: &str) -> usize {
    standmeet_jobs::testing::claim_as_ghost(
        pool,
        "default",
        1,
        &[kind.to_string()],
        "ghost",
        Duration::from_secs(60),
    )
    .await
    .unwrap()
    .len()
}
