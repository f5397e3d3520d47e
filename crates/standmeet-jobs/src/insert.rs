//! Putting jobs in the queue, behind [`JobClient`](crate::JobClient)'s `insert*`
//! methods: alone or inside the caller's transaction (the business row and its job
//! commit together or not at all), many at once, or at most one per key.

use sqlx::{PgConnection, PgExecutor};
use time::OffsetDateTime;
use tracing::Instrument;

use super::client::JobClient;
use super::kind::JobKind;
use super::registry::KindDefaults;
use super::store;
use super::trace;
use super::{Error, JobId, JobState};

/// Runs `insert` with the `traceparent` to store with its job(s): in an insert span
/// when this process carries traces (`trace`), and as it is, with none, otherwise.
async fn traced<T, F: Future<Output = T>>(
    kind: &str,
    queue: &str,
    insert: impl FnOnce(Option<String>) -> F,
) -> T {
    match trace::traces() {
        None => insert(None).await,
        Some(traces) => {
            let span = traces.insert_span(kind, queue);
            let traceparent = span.in_scope(|| traces.current_traceparent());
            insert(traceparent).instrument(span).await
        }
    }
}

/// The client's inserts.
impl JobClient {
    /// Inserts a `K` job with `args` in a transaction of its own, due now, with the
    /// kind's queue, priority and attempts.
    pub async fn insert<K: JobKind>(&self, args: &K::Args) -> Result<JobId, Error> {
        insert_with::<K>(self.pool(), args, InsertOptions::default()).await
    }

    /// [`JobClient::insert`], with what `options` change from the kind's defaults (a
    /// later start, a priority, attempts).
    pub async fn insert_with<K: JobKind>(
        &self,
        args: &K::Args,
        options: InsertOptions,
    ) -> Result<JobId, Error> {
        insert_with::<K>(self.pool(), args, options).await
    }

    /// Inserts a `K` job inside the caller's transaction `tx`: it commits with the
    /// caller's rows or not at all, and no engine sees it before.
    pub async fn insert_tx<K: JobKind>(
        &self,
        tx: &mut PgConnection,
        args: &K::Args,
    ) -> Result<JobId, Error> {
        insert_with::<K>(tx, args, InsertOptions::default()).await
    }

    /// [`JobClient::insert_tx`], with `options`.
    pub async fn insert_tx_with<K: JobKind>(
        &self,
        tx: &mut PgConnection,
        args: &K::Args,
        options: InsertOptions,
    ) -> Result<JobId, Error> {
        insert_with::<K>(tx, args, options).await
    }

    /// Inserts a `K` job for each of `args` in one statement inside the caller's
    /// transaction; answers their ids in the order of `args`.
    pub async fn insert_many_tx<K: JobKind>(
        &self,
        tx: &mut PgConnection,
        args: &[K::Args],
    ) -> Result<Vec<JobId>, Error> {
        insert_many_tx::<K>(tx, args).await
    }

    /// Inserts a `K` job with `unique_key` inside the caller's transaction (or on a
    /// connection of its own), unless an unfinished job holds that key: then it inserts
    /// nothing and answers that job, as a duplicate (River's unique jobs,
    /// graphile-worker's job keys). A running job holds its key when the kind says so
    /// ([`JobKind::UNIQUE_WHILE_RUNNING`]).
    ///
    /// The database's unique index decides, so two processes inserting the same key at
    /// once make one job; another insert of the key waits for the caller's transaction
    /// to end. A job that runs inside its claim still reads `available` (see the
    /// crate's documentation on claims), so it holds its key until its claim is written,
    /// whatever its kind says: a kind that must see every insert after its start should
    /// compare, at its end, what it did with what there is now.
    pub async fn insert_unique_tx<K: JobKind>(
        &self,
        tx: &mut PgConnection,
        args: &K::Args,
        unique_key: &str,
        options: InsertOptions,
    ) -> Result<Inserted, Error> {
        insert_unique::<K>(tx, args, unique_key, options).await
    }
}

/// Anything about one insert that differs from the kind's defaults.
#[derive(Clone, Debug, Default)]
pub struct InsertOptions {
    /// Run no earlier than this (the job is `scheduled` until then).
    pub scheduled_at: Option<OffsetDateTime>,
    /// The priority (lower runs first), instead of the kind's.
    pub priority: Option<i16>,
    /// The attempts it may take, instead of the kind's.
    pub max_attempts: Option<i16>,
}

/// Inserts a job of kind `K` with `options`, through a pool or inside a transaction
/// ([`JobClient::insert`](crate::JobClient::insert) and its kin).
pub(crate) async fn insert_with<'e, K: JobKind>(
    executor: impl PgExecutor<'e>,
    args: &K::Args,
    options: InsertOptions,
) -> Result<JobId, Error> {
    let args = to_json::<K>(args)?;
    let id = traced(K::KIND, K::QUEUE, async |traceparent| {
        store::job_insert(
            executor,
            K::KIND,
            K::QUEUE,
            &args,
            options.max_attempts.unwrap_or(K::MAX_ATTEMPTS),
            options.priority.unwrap_or(K::PRIORITY),
            options.scheduled_at,
            traceparent.as_deref(),
        )
        .await
    })
    .await
    .map_err(Error::from_database)?;
    Ok(id)
}

/// Inserts many jobs of kind `K` in one statement inside the caller's transaction;
/// answers their ids in the order of `args`.
pub(crate) async fn insert_many_tx<K: JobKind>(
    tx: &mut PgConnection,
    args: &[K::Args],
) -> Result<Vec<JobId>, Error> {
    let args = args
        .iter()
        .map(to_json::<K>)
        .collect::<Result<Vec<_>, _>>()?;
    let ids = traced(K::KIND, K::QUEUE, async |traceparent| {
        store::job_insert_many(
            tx,
            K::KIND,
            K::QUEUE,
            &args,
            K::MAX_ATTEMPTS,
            K::PRIORITY,
            traceparent.as_deref(),
        )
        .await
    })
    .await
    .map_err(Error::from_database)?;
    Ok(ids)
}

/// A job's arguments as the JSON the row holds; arguments serde cannot write (a map
/// with keys that are not strings) are refused in words.
fn to_json<K: JobKind>(args: &K::Args) -> Result<serde_json::Value, Error> {
    serde_json::to_value(args).map_err(|err| {
        Error::Refused(format!(
            "the arguments of a {} job cannot be written as JSON: {err}",
            K::KIND
        ))
    })
}

/// What an insert with a unique key did: inserted the job `id`, or found the unfinished
/// job `id` that holds the key (`duplicate`) and inserted nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Inserted {
    /// The job inserted, or the one that holds the key.
    pub id: JobId,
    /// Whether an unfinished job held the key, so nothing was inserted.
    pub duplicate: bool,
}

/// How many times an insert tries again when the key's holder finished or gave the key
/// up between its statements: each try is a statement or two, and a holder that
/// changes that often means something else inserts the key in a loop.
const UNIQUE_TRIES: usize = 8;

/// Inserts a job of kind `K` with `unique_key`, unless an unfinished job (`available`,
/// `scheduled`, `retryable`, and `running` when [`JobKind::UNIQUE_WHILE_RUNNING`])
/// holds that key: then it inserts nothing and answers that job with `duplicate`.
///
/// The database's unique index decides, so two processes inserting the same key at once
/// make one job; inside the caller's transaction the job commits with the business row
/// as usual, and another insert of the key waits for that transaction to end.
///
/// A job that runs inside its claim still reads `available` (see the crate's
/// documentation on claims), so it counts as holding its key until its claim is written,
/// whatever its kind says: a kind that must see every insert after its start should
/// compare, at its end, what it did with what there is now (as the corpus's index job
/// does, under a lock).
pub(crate) async fn insert_unique<K: JobKind>(
    conn: &mut PgConnection,
    args: &K::Args,
    unique_key: &str,
    options: InsertOptions,
) -> Result<Inserted, Error> {
    let args = to_json::<K>(args)?;
    let defaults = KindDefaults {
        queue: K::QUEUE,
        max_attempts: K::MAX_ATTEMPTS,
        priority: K::PRIORITY,
        unique_while_running: K::UNIQUE_WHILE_RUNNING,
    };
    insert_unique_by_name(
        conn,
        K::KIND,
        K::QUEUE,
        defaults,
        &args,
        unique_key,
        options,
    )
    .await
}

/// [`insert_unique`] for a kind known by its name and declarations, on `queue` (a
/// schedule's firing), with its arguments already JSON.
pub(crate) async fn insert_unique_by_name(
    conn: &mut PgConnection,
    kind: &str,
    queue: &str,
    defaults: KindDefaults,
    args: &serde_json::Value,
    unique_key: &str,
    options: InsertOptions,
) -> Result<Inserted, Error> {
    traced(kind, queue, async |traceparent| {
        let traceparent = traceparent.as_deref();
        insert_unique_tries(
            conn,
            kind,
            queue,
            defaults,
            args,
            unique_key,
            options,
            traceparent,
        )
        .await
    })
    .await
}

/// [`insert_unique_by_name`]'s tries, storing `traceparent` with the job.
#[allow(clippy::too_many_arguments)] // One insert's parts, as the statement takes them.
async fn insert_unique_tries(
    conn: &mut PgConnection,
    kind: &str,
    queue: &str,
    defaults: KindDefaults,
    args: &serde_json::Value,
    unique_key: &str,
    options: InsertOptions,
    traceparent: Option<&str>,
) -> Result<Inserted, Error> {
    let max_attempts = options.max_attempts.unwrap_or(defaults.max_attempts);
    let priority = options.priority.unwrap_or(defaults.priority);
    for _ in 0..UNIQUE_TRIES {
        let inserted = store::job_insert_unique(
            &mut *conn,
            kind,
            queue,
            args,
            max_attempts,
            priority,
            options.scheduled_at,
            unique_key,
            traceparent,
        )
        .await
        .map_err(Error::from_database)?;
        if let Some(id) = inserted {
            return Ok(Inserted {
                id,
                duplicate: false,
            });
        }
        match store::job_unique_holder(&mut *conn, unique_key)
            .await
            .map_err(Error::from_database)?
        {
            Some((holder, JobState::Running)) if !defaults.unique_while_running => {
                // It runs on without its key, and the next try inserts this job.
                store::job_release_unique_key(&mut *conn, holder, unique_key)
                    .await
                    .map_err(Error::from_database)?;
            }
            Some((holder, _)) => {
                return Ok(Inserted {
                    id: holder,
                    duplicate: true,
                });
            }
            // Its holder finished between the two statements: try again.
            None => {}
        }
    }
    Err(Error::Refused(format!(
        "cannot insert a {kind} job with unique key {unique_key:?}: the job holding the \
         key changed {UNIQUE_TRIES} times while inserting"
    )))
}
