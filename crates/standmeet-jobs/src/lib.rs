//! StandMeet's job engine: durable jobs in PostgreSQL, River-style, with nothing of
//! the web in it.
//!
//! A job is a row in `jobs` (the schema is the crate's own `migrations/`, applied by
//! [`migrate`] before the application's). Business code inserts it inside its own
//! transaction ([`JobClient::insert_tx`]), so the business row and its job commit
//! together or not at all. Engines in any process fetch it, run its handler and record
//! the outcome; the row is the record that callers read and wait on.
//!
//! ## What a user of the crate sees
//!
//! **[`JobClient`] is the one way in.** Made once per process over a pool
//! ([`JobClient::new`], told its queues with [`JobClient::with_queues`]) and cloned
//! freely, it:
//! - inserts jobs: [`insert`](JobClient::insert) /
//!   [`insert_with`](JobClient::insert_with) in a transaction of their own;
//!   [`insert_tx`](JobClient::insert_tx) / [`insert_tx_with`](JobClient::insert_tx_with)
//!   / [`insert_many_tx`](JobClient::insert_many_tx) in the caller's transaction;
//!   [`insert_unique_tx`](JobClient::insert_unique_tx), at most one unfinished job per
//!   key (River's unique jobs, graphile-worker's job keys), answering the one already
//!   there as a duplicate ([`Inserted`]). [`InsertOptions`] changes a kind's defaults.
//! - reads them: [`get`](JobClient::get), [`get_many`](JobClient::get_many),
//!   [`list`](JobClient::list) with a [`JobFilter`], [`summaries`](JobClient::summaries),
//!   [`progress`](JobClient::progress), the counts and the chart of finished jobs;
//! - acts on them as an operator: [`retry`](JobClient::retry),
//!   [`cancel`](JobClient::cancel), [`delete`](JobClient::delete), and the `_many`
//!   forms in one transaction;
//! - waits for them: [`wait`](JobClient::wait) answers the finished rows, or a receipt
//!   when the limit passes ([`WaitOutcome`]); [`finished_jobs`](JobClient::finished_jobs)
//!   hears every job this process learns finished;
//! - reads and pauses queues ([`queues`](JobClient::queues),
//!   [`pause_queue`](JobClient::pause_queue), [`resume_queue`](JobClient::resume_queue))
//!   and reads, sets and runs the schedules of periodic jobs
//!   ([`schedules`](JobClient::schedules), [`set_schedule`](JobClient::set_schedule),
//!   [`run_schedule_now`](JobClient::run_schedule_now), the types in [`periodic`]).
//!
//! Every call that fails answers one [`Error`]: `NotFound` and `Refused` carry words a
//! person can be shown, `Busy` is a row held by a process that does not answer (try
//! again), `Database` is the database's own failure. Nothing is half done.
//!
//! **Job kinds** implement [`JobKind`] (name, queue, limits, arguments, output and
//! handler) and are put in a [`Registry`]. A handler gets a [`JobContext`] (its job,
//! its attempt, the pool, [`JobContext::jobs`] to insert more) and answers an output or
//! a [`JobError`] (retry, discard, cancel, snooze, as an [`ErrorAction`]).
//!
//! **Running** is [`JobRuntime::start`]: one producer per queue of [`EngineConfig`]
//! (`EngineConfig::default()` plus what differs; [`QueueConfig`] per queue,
//! [`CleanChore`]s for the cleaner), the completer, the maintenance chores and the
//! process's one LISTEN connection, which wakes the client's waiters.
//! [`JobRuntime::shutdown`] stops it gracefully. A process that only waits starts
//! [`JobClient::listen`] instead ([`listener`] has what it answers).
//!
//! Besides: [`attempt`] says which attempt the running code belongs to (for log
//! lines); [`builtin`] holds `system.noop`, `system.sleep` and `system.flaky`; the
//! `bench` feature opens `bare`, the bare limit the benchmark compares the drain
//! with, and the `testing` feature `testing`, a worker's steps one at a time for the
//! engine's own tests. Without the default `engine` feature the crate is only
//! [`JobId`] and [`JobState`], which a browser's wasm can share.
//!
//! ## What it publishes in the database
//!
//! An application shares the engine's database, and SQL of its own may lean on these,
//! and on nothing else of the engine's schema (the other tables, their columns and
//! functions are the engine's to change):
//! - **the view `job_status`**: `id`, `kind`, `state`, `last_error` (the last failed
//!   attempt's words), `finalized_at`, `args`, one row per job. It is how an
//!   application's SQL reads a job it keeps the id of; its columns change only by new
//!   ones added at the end. PostgreSQL plans it as the table under it, so its indexes
//!   serve (a filter on `state` finds the few running jobs);
//! - **`jobs (id)`** as the target of a foreign key (`ON DELETE SET NULL`: finished jobs
//!   are cleaned away);
//! - **an `INSERT INTO jobs`** naming `kind` and `args`, and if it likes `queue`,
//!   `max_attempts`, `priority` and `trace_context`: a job inserted by
//!   plain SQL (a trigger, an operator, another service) is picked up as promptly as
//!   one inserted through [`JobClient`];
//! - **the notification** `standmeet_job_final`, whose payload is the id of a job that
//!   reached a terminal state, sent in the transaction that put it there.
//!
//! The schema comes from [`migrate`], called before the application applies its own
//! migrations. The engine records what it applied in a table of its own,
//! `standmeet_job_migrations` ([`MIGRATION_TABLE`]), with versions of its own; an
//! application keeps its own ledger. A database made while StandMeet kept both in sqlx's
//! `_sqlx_migrations` has the engine's rows moved into its table by the first call.
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
//! ## The pieces, in layers (private unless named above)
//!
//! Each file uses only files below it: of a lower layer, or named before it in its own.
//! So no two files need each other, round any loop
//! (`tests/it/architecture.rs` checks it, as it does the application's modules). The
//! layers, from the bottom:
//!
//! 1. **Foundations**, which know nothing of jobs' storage: `types` ([`JobId`],
//!    [`JobState`]); `error` ([`Error`]); `migrate` ([`migrate`], the schema and the
//!    engine's own record of it); `try_again`, the pauses between tries of a
//!    statement until a deadline; `pool`, the options of the engine's pools and the
//!    connections it needs beside its claims'; `config` ([`EngineConfig`],
//!    [`QueueConfig`], [`CleanChore`]); `kept`, the connections claims keep between
//!    them (sqlx tries each one that goes back to its pool with a round trip), and a
//!    claim's transaction on one; [`attempt`], which attempt the running code belongs
//!    to (for log lines); [`trace`], a job keeps the W3C trace context of the span that
//!    inserted it, and its attempts are spans of that trace.
//! 2. **Storage**: `store`, every SQL statement about jobs, one documented function
//!    each (its files share only what `store` itself defines).
//! 3. **Signals**: `waiters`, callers waiting for jobs to finish, up to a limit, then a
//!    receipt; [`listener`], the one LISTEN connection of the process, and what it
//!    wakes (waiters, producers, running attempts, subscribers to finished jobs);
//!    `queues`, each queue's figures, and the pause every process obeys.
//! 4. **The client and the claims**: `client`, [`JobClient`]'s reads, operator's
//!    calls, waits and queues; `claim`, a batch of jobs that run inside the
//!    transaction that claimed them (each holds one of its queue's claim slots,
//!    counted for the whole database, leaves a trace that makes its attempts count
//!    even if its process dies, and lets go of its jobs within the lease however its
//!    process fails); `maintenance`, the scheduler, rescuer, cleaner, lease renewal and
//!    the folding of the summaries of finished jobs.
//! 5. **Job kinds**: `kind`, the [`JobKind`] trait, [`JobContext`] (which holds the
//!    client and the attempt's claim) and [`JobError`]; `registry`, the handlers this
//!    process can run, by kind ([`Registry`]); `retry`, what an attempt's outcome makes
//!    of a job (the backoff's formula is the database's `job_backoff`); [`builtin`],
//!    `system.noop`, `system.sleep` and `system.flaky`; `insert`, the client's inserts
//!    (batches, options, unique keys), written here because they take a kind;
//!    [`periodic`], schedules in `job_schedules`, fired once per slot across processes,
//!    and the client's calls about them.
//! 6. **Running**: `completer`, which writes the outcomes of attempts that outlived
//!    their claim, batching them when busy; `executor`, one attempt (timeout, panic
//!    capture, cancellation); `producer`, one per queue, which claims in batches (one
//!    call when the queue is nearly idle) and runs up to N at once; `engine` and
//!    `runtime`, which put it together: start, and a graceful stop.
//!
//! Beside the layers, for this crate's own benchmark and tests only: `bare` (feature
//! `bench`) and `testing` (feature `testing`).

// The engine's door is what its users read: every public item says what it is, and
// nothing is `pub` that no user of the crate can reach (`pub(crate)` says so instead).
// Crate attributes, because Cargo cannot add lints to one member that inherits the
// workspace's (`[lints] workspace = true`, which the engine keeps for the shared ones).
#![warn(missing_docs, unreachable_pub)]

mod types;
pub use types::{JobId, JobState};

#[cfg(feature = "engine")]
pub mod attempt;
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
mod error;
#[cfg(feature = "engine")]
mod executor;
#[cfg(feature = "engine")]
mod insert;
#[cfg(feature = "engine")]
mod kept;
#[cfg(feature = "engine")]
mod kind;
#[cfg(feature = "engine")]
pub mod listener;
#[cfg(feature = "engine")]
mod migrate;
// Some of their items are public for the `testing` door only (the engine's own
// tests); without it they are the crate's, and the lint is checked with it on.
#[cfg_attr(
    not(feature = "testing"),
    allow(unreachable_pub, reason = "public through the `testing` door")
)]
#[cfg(feature = "engine")]
mod maintenance;
#[cfg(feature = "engine")]
pub mod periodic;
#[cfg(feature = "engine")]
mod pool;
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
// Some of their items are public for the `testing` door only (the engine's own
// tests); without it they are the crate's, and the lint is checked with it on.
#[cfg_attr(
    not(feature = "testing"),
    allow(unreachable_pub, reason = "public through the `testing` door")
)]
#[cfg(feature = "engine")]
mod store;
#[cfg(feature = "testing")]
pub mod testing;
#[cfg(feature = "engine")]
pub mod trace;
#[cfg(feature = "engine")]
mod try_again;
#[cfg(feature = "engine")]
mod waiters;

// The door, and what goes through it.
#[cfg(feature = "engine")]
pub use client::{JobClient, WaiterFigures};
#[cfg(feature = "engine")]
pub use error::{DatabaseError, Error};
#[cfg(feature = "engine")]
pub use insert::{InsertOptions, Inserted};
#[cfg(feature = "engine")]
pub use queues::QueueSummary;
#[cfg(feature = "engine")]
pub use store::{
    AttemptError, BulkOutcome, CancelOutcome, DeleteOutcome, FinishedInMinute, JobFilter,
    JobProgress, JobRow, JobSummary, RetryOutcome,
};
#[cfg(feature = "engine")]
pub use waiters::{WaitOutcome, WakeLatency};
// Job kinds and their handlers.
#[cfg(feature = "engine")]
pub use kind::{ErrorAction, JobContext, JobError, JobKind};
#[cfg(feature = "engine")]
pub use registry::Registry;
// Running the engine.
#[cfg(feature = "engine")]
pub use config::{ChoreError, CleanChore, EngineConfig, QueueConfig};
#[cfg(feature = "engine")]
pub use runtime::JobRuntime;
// The schema.
#[cfg(feature = "engine")]
pub use migrate::{MIGRATION_TABLE, Migrated, migrate, migration_versions};

/// The notification channels, in one place. Payloads: a queue name for `INSERT`, a job
/// id for `FINAL` and `CANCEL`.
#[cfg(feature = "engine")]
pub(crate) mod channels {
    /// A queue has available work (a trigger sends it).
    pub(crate) const INSERT: &str = "standmeet_job_insert";
    /// A job reached a terminal state (a trigger sends it).
    pub(crate) const FINAL: &str = "standmeet_job_final";
    /// An admin asked a running job to stop; its holder stops the attempt.
    pub(crate) const CANCEL: &str = "standmeet_job_cancel";
}
