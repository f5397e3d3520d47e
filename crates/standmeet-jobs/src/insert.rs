//! Putting jobs in the queue: alone ([`insert`]), inside the caller's transaction
//! ([`insert_tx`]: the business row and its job commit together or not at all), with
//! options ([`insert_with`]), or many at once ([`insert_many_tx`]).

use anyhow::Context;
use sqlx::{PgConnection, PgExecutor, PgPool};
use time::OffsetDateTime;

use super::JobId;
use super::kind::JobKind;
use super::store;

/// Anything about one insert that differs from the kind's defaults.
#[derive(Clone, Debug, Default)]
pub struct InsertOptions {
    /// Run no earlier than this (the job is `scheduled` until then).
    pub scheduled_at: Option<OffsetDateTime>,
    pub priority: Option<i16>,
    pub max_attempts: Option<i16>,
}

/// Inserts a job of kind `K` on its own.
pub async fn insert<K: JobKind>(pool: &PgPool, args: &K::Args) -> anyhow::Result<JobId> {
    insert_with::<K>(pool, args, InsertOptions::default()).await
}

/// Inserts a job of kind `K` inside the caller's transaction.
pub async fn insert_tx<K: JobKind>(tx: &mut PgConnection, args: &K::Args) -> anyhow::Result<JobId> {
    insert_with::<K>(tx, args, InsertOptions::default()).await
}

/// Inserts a job of kind `K` with `options`, through a pool or inside a transaction.
pub async fn insert_with<'e, K: JobKind>(
    executor: impl PgExecutor<'e>,
    args: &K::Args,
    options: InsertOptions,
) -> anyhow::Result<JobId> {
    let args = serde_json::to_value(args)
        .with_context(|| format!("the arguments of a {} job", K::KIND))?;
    store::job_insert(
        executor,
        K::KIND,
        K::QUEUE,
        &args,
        options.max_attempts.unwrap_or(K::MAX_ATTEMPTS),
        options.priority.unwrap_or(K::PRIORITY),
        options.scheduled_at,
    )
    .await
    .with_context(|| format!("cannot insert a {} job", K::KIND))
}

/// Inserts many jobs of kind `K` in one statement inside the caller's transaction;
/// answers their ids in the order of `args`.
pub async fn insert_many_tx<K: JobKind>(
    tx: &mut PgConnection,
    args: &[K::Args],
) -> anyhow::Result<Vec<JobId>> {
    let args = args
        .iter()
        .map(serde_json::to_value)
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("the arguments of {} jobs", K::KIND))?;
    store::job_insert_many(tx, K::KIND, K::QUEUE, &args, K::MAX_ATTEMPTS, K::PRIORITY)
        .await
        .with_context(|| format!("cannot insert {} jobs", K::KIND))
}
