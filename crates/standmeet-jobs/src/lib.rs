//! StandMeet's job engine: durable jobs in PostgreSQL, River-style, with nothing of
//! the web in it.
//!
//! A job is a row in `jobs` (the schema is the crate's own `migrations/`, applied by
//! [`MIGRATOR`] before the application's). Business code
//! inserts it in its own transaction ([`insert_tx`]), so the business row and its job
//! commit together or not at all. Engines in any process fetch it, run its handler and
//! record the outcome; the row is the record that callers read and wait on.
//!
//! ## Using it
//!
//! - A job type implements [`JobKind`] (its name, queue, limits, arguments, output and
//!   handler); its handler gets a [`JobContext`] and answers an output or a
//!   [`JobError`] (retry, discard, cancel, snooze).
//! - [`JobClient`] is the one way in: insert, get, list, retry, cancel, delete, wait
//!   (up to a limit, then a receipt), hear jobs finish ([`JobClient::finished_jobs`]),
//!   and the queues' figures and pauses. [`insert_tx`] / [`insert_many_tx`] insert in
//!   the caller's transaction; [`insert_unique`] inserts at most one unfinished job per
//!   key (River's unique jobs, graphile-worker's job keys), answering the one already
//!   there as a duplicate.
//! - [`JobRuntime::start`] runs a process's engine: one producer per queue of
//!   [`EngineConfig`], the completer, the maintenance chores and the process's one
//!   LISTEN connection, which wakes the client's waiters. [`JobRuntime::shutdown`] stops
//!   it gracefully. A process that only waits starts [`JobClient::listen`] instead.
//! - Without the default `engine` feature the crate is only [`JobId`] and [`JobState`],
//!   which a browser's wasm can share. The `testing` feature opens the steps of a
//!   worker one at a time, for the engine's own tests.
//!
//! ## States, and who moves jobs between them
//!
//! - `available`: ready to run. In: an insert due now, the scheduler (a `scheduled` or
//!   `retryable` job came due), an admin's retry, a claim that ended without writing
//!   (its transaction rolled back: the row is as it was). Out: a producer's claim, in
//!   a process that has a handler for its kind (the others leave it where it is). A
//!   claim takes jobs by row lock and runs them inside its transaction; its one write
//!   moves each job to where its attempt took it, so a quick job goes from `available`
//!   straight to `completed` (or `retryable`, …) in one row version, and the row reads
//!   `available` to everyone else until that write commits. When a claim's process
//!   dies before its write, the rescuer counts the attempts its trace (`job_claims`)
//!   recorded as started: to `retryable`, or `discarded` after the last attempt.
//! - `scheduled`: waiting for `scheduled_at`. In: an insert with a later time, a
//!   handler's snooze (which gives its attempt number back: a snooze is not a try).
//!   Out: the scheduler; an admin's cancel.
//! - `running`: held by one process (`attempted_by`) under a lease it renews for
//!   exactly the attempts it still has in flight. In: a claim's write, for an attempt
//!   still going when the claim's window closes (attempt + 1 in the same statement);
//!   the one-call claim of a nearly idle queue, which takes its jobs `running` at once.
//!   Out: the completer (fenced: only while still `running` at that attempt under that
//!   process), the rescuer when the lease ran out (the old holder's renewal then finds
//!   the job gone and stops the attempt), [`JobContext::complete_tx`] inside a
//!   handler's own transaction.
//! - `retryable`: an attempt failed; runs again after a backoff. In: a claim's write or
//!   the completer, the rescuer ("worker lost", or "died … during it" for a claim's
//!   unrecorded attempt), shutdown ("interrupted"). Out: the scheduler; an admin's
//!   cancel.
//! - `completed`, `discarded`, `cancelled`: terminal. In: a claim's write (the main
//!   path for quick jobs), the completer, the rescuer (out of attempts), an admin's
//!   cancel, an operator's SQL. Every move into them sends
//!   `pg_notify('standmeet_job_final', id)` in the same transaction (a trigger; a
//!   claim's write sends it itself, which costs less, and the trigger stands aside).
//!   Out: only an admin's retry (`discarded`, `cancelled`; refused while another job
//!   holds its unique key), and the cleaner, which
//!   deletes them after their retention. A finished job has no index entry but its
//!   primary key's: what is shown of finished jobs (counts, the chart, the Tasks
//!   filters) is read from the summaries kept in the same transactions
//!   (`job_finished_minutes`, `job_finished_blocks`; see `store::outcome`).
//!
//! ## The pieces (private unless named above)
//!
//! - `kind`: the [`JobKind`] trait, [`JobContext`] and [`JobError`].
//! - `insert`: `insert`, `insert_tx`, batch inserts, insert options, unique keys.
//! - `client`: [`JobClient`].
//! - `store`: every SQL statement about jobs, one documented function each.
//! - `retry`: what an attempt's outcome makes of a job (the backoff's formula is the
//!   database's `job_backoff`).
//! - `registry`: the handlers this process can run, by kind ([`Registry`]).
//! - `executor`: one attempt: timeout, panic capture, cancellation.
//! - `attempt_context`: which attempt the running code belongs to, for log lines
//!   ([`current_attempt`]).
//! - `producer`: one per queue: claims in batches (one call when the queue is nearly
//!   idle), runs up to N at once.
//! - `claim`: a batch of jobs that run inside the transaction that claimed them; each
//!   holds one of its queue's claim slots (counted for the whole database), leaves a
//!   trace that makes its attempts count even if its process dies, and lets go of its
//!   jobs within the lease however its process fails.
//! - `queues`: each queue's figures, and the pause every process obeys.
//! - `completer`: writes the outcomes of attempts that outlived their claim, batching
//!   them when busy.
//! - `maintenance`: the scheduler, rescuer, cleaner, lease renewal and the folding of
//!   the summaries of finished jobs.
//! - `listener`: the one LISTEN connection of the process, and what it wakes (waiters,
//!   producers, running attempts, subscribers to finished jobs).
//! - `waiters`: callers waiting for jobs to finish, up to a limit, then a receipt.
//! - `engine`, `runtime`: put it together: start, and a graceful stop.
//! - [`periodic`]: schedules in `job_schedules`, fired once per slot across processes.
//! - [`builtin`]: `system.noop`, `system.sleep` and `system.flaky`.

mod types;
pub use types::{JobId, JobState};

#[cfg(feature = "engine")]
mod attempt_context;
#[cfg(feature = "engine")]
pub use attempt_context::{AttemptContext, current_attempt, in_attempt};
#[cfg(feature = "bench")]
pub mod bare;
#[cfg(feature = "engine")]
pub mod builtin;
#[cfg(feature = "engine")]
mod claim;
#[cfg(feature = "engine")]
mod client;
#[cfg(feature = "engine")]
mod completer;
#[cfg(feature = "engine")]
mod config;
#[cfg(feature = "engine")]
mod engine;
#[cfg(feature = "engine")]
mod executor;
#[cfg(feature = "engine")]
mod insert;
#[cfg(feature = "engine")]
mod kind;
#[cfg(feature = "engine")]
mod listener;
#[cfg(feature = "engine")]
mod maintenance;
#[cfg(feature = "engine")]
pub mod periodic;
#[cfg(feature = "engine")]
mod producer;
#[cfg(feature = "engine")]
mod queues;
#[cfg(feature = "engine")]
mod registry;
#[cfg(feature = "engine")]
mod retry;
#[cfg(feature = "engine")]
mod runtime;
#[cfg(feature = "engine")]
mod store;
#[cfg(feature = "testing")]
pub mod testing;
#[cfg(feature = "engine")]
mod waiters;

#[cfg(feature = "engine")]
pub use client::{JobClient, WaiterFigures};
#[cfg(feature = "engine")]
pub use config::{CLAIM_WINDOW, CleanChore, EngineConfig, QueueConfig, worker_id};
#[cfg(feature = "engine")]
pub use engine::{PERIODIC_TICK, PING_AFTER_IDLE, connections_needed, pool_options};
#[cfg(feature = "engine")]
pub use insert::{
    InsertOptions, Inserted, insert, insert_many_tx, insert_tx, insert_unique, insert_with,
};
#[cfg(feature = "engine")]
pub use kind::{Completed, ErrorAction, JobContext, JobError, JobKind};
#[cfg(feature = "engine")]
pub use listener::{
    Finished, FinishedJobs, ListenerState, Listening, PING_AFTER_QUIET, PING_ANSWER_WITHIN,
};
#[cfg(feature = "engine")]
pub use queues::{QueueError, QueueSummary};
#[cfg(feature = "engine")]
pub use registry::{KindDefaults, Registry};
#[cfg(feature = "engine")]
pub use runtime::JobRuntime;
#[cfg(feature = "engine")]
pub use store::{
    AttemptError, BulkOutcome, CancelOutcome, DeleteOutcome, FinishedInMinute, JobFilter,
    JobProgress, JobRow, JobSummary, RetryOutcome,
};
#[cfg(feature = "engine")]
pub use waiters::{WaitError, WaitOutcome};

/// The engine's schema: the tables, functions and triggers under this crate's
/// `migrations/`, compiled in. An application that keeps its own tables in the same
/// database applies these first (they refer to none of its tables, and its own may refer
/// to `jobs`), recording both sets in sqlx's one `_sqlx_migrations` table: run them as one
/// list, or each with `set_ignore_missing`, so that neither refuses the other's versions.
#[cfg(feature = "engine")]
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// The notification channels, in one place. Payloads: a queue name for `INSERT`, a job
/// id for `FINAL` and `CANCEL`.
#[cfg(feature = "engine")]
pub(crate) mod channels {
    /// A queue has available work (a trigger sends it).
    pub const INSERT: &str = "standmeet_job_insert";
    /// A job reached a terminal state (a trigger sends it).
    pub const FINAL: &str = "standmeet_job_final";
    /// An admin asked a running job to stop; its holder stops the attempt.
    pub const CANCEL: &str = "standmeet_job_cancel";
}
