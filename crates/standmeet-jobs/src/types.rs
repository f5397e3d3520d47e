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
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    Available,
    Scheduled,
    Running,
    Retryable,
    Completed,
    Discarded,
    Cancelled,
}

impl JobState {
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
