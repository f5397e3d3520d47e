//! The job queue: durable jobs in PostgreSQL, River-style.
//!
//! A job is a row in `jobs` (see the migration). Business code inserts it in its own
//! transaction ([`insert_tx`]), so the business row and its job commit together or not
//! at all. Workers in any copy of StandMeet fetch it, run its handler and record the
//! outcome; the row is the record that the Tasks panel and the waiters read.
//!
//! ## States, and who moves jobs between them
//!
//! - `available`: ready to run. In: [`insert`] (due now), the scheduler (a `scheduled`
//!   or `retryable` job came due), an admin's retry. Out: a producer's claim, in a
//!   process that has a handler for its kind (the others leave it where it is); the
//!   rescuer, when a claim started an attempt and its process died before recording it
//!   (to `retryable`, or `discarded` after the last attempt; see [`claim`]).
//! - `scheduled`: waiting for `scheduled_at`. In: [`insert`] with a later time, a
//!   handler's snooze (which gives its attempt number back: a snooze is not a try).
//!   Out: the scheduler; an admin's cancel.
//! - `running`: held by one worker process (`attempted_by`) under a lease it renews for
//!   exactly the attempts it still has in flight. In: a producer's claim, for an
//!   attempt still going when the claim is written (attempt + 1 in the same
//!   statement; a quick attempt goes from `available` straight to its outcome, see
//!   [`claim`]). Out: the completer (fenced: only while still `running` at
//!   that attempt under that process), the rescuer when the lease ran out (the old
//!   holder's renewal then finds the job gone and stops the attempt), `complete_tx`
//!   inside a handler's own transaction.
//! - `retryable`: an attempt failed; runs again after a backoff. In: the completer, the
//!   rescuer ("worker lost", or "died … during it" for a claim's unrecorded attempt),
//!   shutdown ("interrupted"). Out: the scheduler; an admin's
//!   cancel.
//! - `completed`, `discarded`, `cancelled`: terminal. In: the completer, the rescuer
//!   (out of attempts), an admin's cancel, an operator's SQL. Every move into them sends
//!   `pg_notify('standmeet_job_final', id)` in the same transaction (a trigger; a
//!   claim's write sends it itself, which costs less, and the trigger stands aside). Out:
//!   only an admin's retry (`discarded`, `cancelled`), and the cleaner, which deletes
//!   them after their retention.
//!
//! ## The pieces
//!
//! - [`kind`]: the [`JobKind`] trait a job type implements, the context its handler
//!   gets, and the errors it can answer with (retry, discard, cancel, snooze).
//! - [`insert`](mod@insert): `insert`, `insert_tx`, batch inserts, insert options.
//! - [`client`]: [`JobClient`], the one way in for the rest of StandMeet: get, list,
//!   retry, cancel, delete, wait.
//! - `store`: every SQL statement about jobs, one documented function each; private.
//! - [`retry`]: the backoff, and what an attempt's outcome makes of a job.
//! - [`registry`]: the handlers this process can run, by kind.
//! - [`executor`]: one attempt: span, timeout, panic capture, cancellation.
//! - [`producer`]: one per queue: claims in batches, runs up to N at once.
//! - [`claim`]: a batch of jobs that run inside the transaction that claimed them, so
//!   that a quick job is written once (its outcome) and a slow one `running` first;
//!   each holds one of its queue's claim slots, counted for the whole database, leaves
//!   a trace that makes its attempts count even if its process dies, and lets go of its
//!   jobs within the lease however its process fails.
//! - [`queues`]: each queue's figures, and the pause every process obeys.
//! - [`completer`]: writes outcomes, batching them when busy.
//! - [`maintenance`]: the scheduler, rescuer, cleaner and lease renewal.
//! - [`listener`]: the one LISTEN connection of the process, and what it wakes.
//! - [`live`]: the live job states that `GET /api/live` streams to the browser, fed by
//!   the listener and one shared re-read per process.
//! - [`waiters`]: callers waiting for jobs to finish, up to a limit, then a receipt.
//! - [`engine`]: puts it together: start, and a graceful stop.
//! - [`runtime`]: a process's listener and engine, started and stopped in order.
//! - [`builtin`]: `system.noop` and `system.sleep`.

pub mod builtin;
mod claim;
mod client;
mod completer;
mod config;
mod engine;
mod executor;
mod insert;
mod kind;
mod listener;
pub mod live;
mod maintenance;
mod producer;
mod queues;
mod registry;
mod retry;
mod runtime;
mod store;
#[doc(hidden)]
pub mod testing;
mod waiters;

pub use client::JobClient;
pub use config::{CLAIM_WINDOW, CleanChore, EngineConfig, QueueConfig, worker_id};
pub use engine::{CONTROL_CONNECTIONS, Engine, connections_needed};
pub use insert::{InsertOptions, insert, insert_many_tx, insert_tx, insert_with};
pub use kind::{Completed, ErrorAction, JobContext, JobError, JobKind};
pub use listener::{Signals, StopReason, spawn_listener, spawn_listener_on};
pub use queues::{QueueError, QueueSummary};
pub use registry::Registry;
pub use runtime::JobRuntime;
pub use store::{
    AttemptError, BulkOutcome, CancelOutcome, DeleteOutcome, FinishedInMinute, JobFilter, JobRow,
    JobSummary, RetryOutcome,
};
pub use waiters::{WaitError, WaitOutcome, Waiters};

pub use crate::model::{JobId, JobState};

/// The notification channels, in one place. Payloads: a queue name for `INSERT`, a job
/// id for `FINAL` and `CANCEL`.
pub mod channels {
    /// A queue has available work (a trigger sends it).
    pub const INSERT: &str = "standmeet_job_insert";
    /// A job reached a terminal state (a trigger sends it).
    pub const FINAL: &str = "standmeet_job_final";
    /// An admin asked a running job to stop; its holder stops the attempt.
    pub const CANCEL: &str = "standmeet_job_cancel";
}
