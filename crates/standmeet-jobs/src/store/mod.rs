//! Every SQL statement about jobs, one documented function each, named noun first, in
//! a file per noun: `insert`, `claim` (the one pick), `outcome` (the one way an
//! attempt's outcome is written), `maintenance` (leases, scheduling, rescue, cleaning),
//! `operator` (cancel, retry, delete), `read`, `queue`, `schedule` (periodic jobs) and
//! `worker`. The state machine
//! lives here: each statement says in its WHERE clause which states it moves jobs out
//! of, so a job that moved meanwhile is simply not touched (fencing).

mod claim;
mod insert;
mod maintenance;
mod operator;
mod outcome;
mod queue;
mod read;
mod schedule;
mod worker;

pub(crate) use claim::{
    ClaimFate, ClaimedRows, job_claim, job_claim_again, job_claim_begin_in_slot_sql,
    job_claim_begin_sql, job_claim_running, job_claim_settle, job_claim_trace,
    job_count_dead_claims, job_trace_contexts,
};
pub(crate) use insert::{
    job_insert, job_insert_many, job_insert_unique, job_release_unique_key, job_unique_holder,
};
pub(crate) use maintenance::{
    job_delete_finished, job_finished_due, job_renew_leases, job_schedule_due,
};
pub use operator::{BulkOutcome, CancelOutcome, DeleteOutcome, RetryOutcome};
pub(crate) use operator::{
    job_cancel, job_cancel_many, job_delete, job_delete_many, job_retry, job_retry_many,
};
pub(crate) use outcome::{RecordedJob, job_counts_by_trigger_again, job_record_claimed};
pub(crate) use queue::{
    QueueStateCount, queue_pause, queue_paused, queue_resume, queue_state_counts,
};
pub use read::{FinishedInMinute, JobFilter, JobProgress, JobSummary};
pub(crate) use read::{
    job_count_by_state_and_kind, job_finished_per_minute, job_get, job_get_many, job_list_page,
    job_progress, job_state_counts, job_summaries, job_terminal_among,
};
// What the `testing` door shows the engine's own tests as well: public with it,
// crate-private without.
#[cfg(feature = "testing")]
pub use maintenance::{job_rescue_expired, job_summaries_fold};
#[cfg(not(feature = "testing"))]
pub(crate) use maintenance::{job_rescue_expired, job_summaries_fold};
#[cfg(feature = "testing")]
pub use outcome::{Delay, Outcome, OutputJson, job_record_outcomes};
#[cfg(not(feature = "testing"))]
pub(crate) use outcome::{Delay, Outcome, OutputJson, job_record_outcomes};
// What only the engine's own tests read.
#[cfg(feature = "testing")]
pub use claim::{SLOT_WAIT, slot_lock_key};
#[cfg(feature = "testing")]
pub use outcome::MAX_ERROR_CHARS;
#[cfg(feature = "testing")]
pub use read::FINISHED_PER_MINUTE_SQL;
pub(crate) use schedule::{
    NewSchedule, ScheduleUpdate, schedule_claim_slot, schedule_enabled, schedule_insert_missing,
    schedule_list, schedule_lock, schedule_lock_to_run, schedule_record_run, schedule_update,
};
pub(crate) use worker::{
    worker_forget_silent, worker_heartbeat, worker_known_kinds, worker_remove,
};

use std::time::Duration;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::{JobId, JobState};

/// The longest any delay may be: the backoff's cap, a handler's `retry_after` or
/// snooze, alike. Past a week a retry is no longer what anybody waits for, and an
/// unbounded delay would overflow PostgreSQL's interval.
pub const MAX_DELAY: Duration = Duration::from_secs(7 * 24 * 3600);

/// [`MAX_DELAY`] in milliseconds, as `job_backoff` takes its cap.
pub(crate) fn max_delay_ms() -> f64 {
    MAX_DELAY.as_millis() as f64
}

/// One failed attempt, as kept in `errors`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AttemptError {
    /// The attempt that failed.
    pub attempt: i16,
    #[serde(with = "time::serde::rfc3339")]
    /// When it failed.
    pub at: OffsetDateTime,
    /// Why, in its words.
    pub error: String,
}

/// A whole `jobs` row. (Also read from the row as jsonb, `to_jsonb(jobs)`, which is
/// how the writes of outcomes hand finished jobs to this process's waiters.)
#[derive(Clone, Debug, sqlx::FromRow, Deserialize)]
pub struct JobRow {
    /// Its id.
    pub id: JobId,
    /// Its kind's name.
    pub kind: String,
    /// Its queue.
    pub queue: String,
    /// Its arguments.
    pub args: serde_json::Value,
    /// Its state.
    pub state: JobState,
    /// Attempts started so far.
    pub attempt: i16,
    /// The attempts it may take in all.
    pub max_attempts: i16,
    /// Its priority (lower runs first).
    pub priority: i16,
    #[serde(with = "time::serde::rfc3339")]
    /// When it is due.
    pub scheduled_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    /// When it was inserted.
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    /// When its latest attempt started.
    pub attempted_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339::option")]
    /// When it reached a terminal state.
    pub finalized_at: Option<OffsetDateTime>,
    /// Its failed attempts, oldest first ([`AttemptError`]s).
    pub errors: serde_json::Value,
    /// What its completing attempt answered.
    pub output: Option<serde_json::Value>,
    /// The process running it, or that ran its latest attempt.
    pub attempted_by: Option<String>,
    #[serde(with = "time::serde::rfc3339::option")]
    /// When an admin asked a running attempt to stop.
    pub cancel_requested_at: Option<OffsetDateTime>,
    /// The W3C `traceparent` of the span that inserted the job (see `trace`), when the
    /// inserting process exported traces; [`JobRow::trace_id`] is its trace's id.
    #[serde(default)]
    pub trace_context: Option<String>,
}

impl JobRow {
    /// The id of the trace the job was inserted in, as trace viewers look it up.
    pub fn trace_id(&self) -> Option<&str> {
        self.trace_context
            .as_deref()
            .and_then(crate::trace::trace_id_of)
    }

    /// The error entries, oldest first.
    pub fn attempt_errors(&self) -> Vec<AttemptError> {
        serde_json::from_value(self.errors.clone()).unwrap_or_default()
    }
}

/// A job a producer just fetched or claimed, with the number of the attempt it starts.
#[derive(Clone, Debug)]
pub(crate) struct FetchedJob {
    pub id: JobId,
    pub kind: String,
    /// The arguments as JSON text (`args::text`), for the handler to parse straight
    /// into its own type.
    pub args: String,
    pub attempt: i16,
    pub max_attempts: i16,
    /// The `traceparent` of the span that inserted the job (see `trace`), if any.
    pub trace_context: Option<String>,
}

/// One attempt this process holds: the job and the attempt number it fetched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct HeldAttempt {
    pub id: JobId,
    pub attempt: i16,
}

impl FetchedJob {
    /// The attempt this fetch starts, as this process holds it.
    pub(crate) fn attempt_held(&self) -> HeldAttempt {
        HeldAttempt {
            id: self.id,
            attempt: self.attempt,
        }
    }
}

/// Whether the database refused the statement itself, so that the same write would
/// fail again: any error it answered with, except those that say the connection, the
/// server or the moment was at fault (see [`passing_sqlstate`]). Data it refuses (class
/// 22), a broken constraint (23), a limit (54, e.g. an oversized jsonb), a role's
/// `statement_timeout` (57014) all come back on every try; treated as passing, they
/// would re-run the jobs forever.
pub(crate) fn refused_for_good(err: &sqlx::Error) -> bool {
    err.as_database_error()
        .and_then(|db| db.code())
        .is_some_and(|code| !passing_sqlstate(&code))
}

/// SQLSTATEs that say nothing about the statement: the connection broke (class 08), the
/// transaction lost a race (40: serialization, deadlock), the server is short of
/// something (53: disk, memory, connections) or going away (57P01–57P05: shutdown,
/// cannot connect now, a session timeout), a system or I/O error (58), a lock not had
/// in time (55P03), or the session's idle transaction was ended (25P03). Tried again,
/// such a write may well go through.
fn passing_sqlstate(code: &str) -> bool {
    ["08", "40", "53", "58", "57P"]
        .iter()
        .any(|class| code.starts_with(class))
        || matches!(code, "55P03" | "25P03")
}
