//! The two words a job is spoken of in outside the engine: its id and its state. They
//! compile without the `engine` feature, so the browser's wasm shares them with the
//! server.

use serde::{Deserialize, Serialize};

/// A job's id: the `jobs` primary key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "engine", derive(sqlx::Type))]
#[cfg_attr(feature = "engine", sqlx(transparent))]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(transparent)]
pub struct JobId(pub i64);

impl std::fmt::Display for JobId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// The `job_state` enum of the database. See the crate's documentation for who moves
/// a job into and out of each state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "engine", derive(sqlx::Type))]
#[cfg_attr(
    feature = "engine",
    sqlx(type_name = "job_state", rename_all = "lowercase")
)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    /// Ready to run.
    Available,
    /// Waiting for its time (`scheduled_at`).
    Scheduled,
    /// Held by one process, under a lease it renews.
    Running,
    /// An attempt failed; it runs again after a backoff.
    Retryable,
    /// Done: its handler succeeded.
    Completed,
    /// Given up: out of attempts, or a failure no retry mends.
    Discarded,
    /// Stopped for good by an admin or its handler.
    Cancelled,
}

/// Written by hand, not derived: a derive makes each documented variant a schema of its
/// own (`oneOf`), where a client expects the plain list of the state's words.
#[cfg(feature = "schemars")]
impl schemars::JsonSchema for JobState {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "JobState".into()
    }

    fn schema_id() -> std::borrow::Cow<'static, str> {
        concat!(module_path!(), "::JobState").into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "The `job_state` enum of the database. See the crate's documentation for who moves\na job into and out of each state.",
            "type": "string",
            "enum": JobState::ALL.map(JobState::as_str),
        })
    }
}

impl JobState {
    /// Every state, in the order a job usually goes through them.
    pub const ALL: [JobState; 7] = [
        JobState::Available,
        JobState::Scheduled,
        JobState::Running,
        JobState::Retryable,
        JobState::Completed,
        JobState::Discarded,
        JobState::Cancelled,
    ];

    /// Completed, discarded and cancelled jobs are finished: nothing moves them again
    /// but an admin's retry.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            JobState::Completed | JobState::Discarded | JobState::Cancelled
        )
    }

    /// The state's name, as the database and the wire spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Available => "available",
            JobState::Scheduled => "scheduled",
            JobState::Running => "running",
            JobState::Retryable => "retryable",
            JobState::Completed => "completed",
            JobState::Discarded => "discarded",
            JobState::Cancelled => "cancelled",
        }
    }

    /// The state named `text` (as [`JobState::as_str`] spells it), if any.
    pub fn parse(text: &str) -> Option<JobState> {
        JobState::ALL
            .into_iter()
            .find(|state| state.as_str() == text)
    }
}

impl std::fmt::Display for JobState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
