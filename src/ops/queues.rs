//! The job queues: every queue's figures, and Pause / Resume in every process (the
//! pause itself is the job engine's). The queues page (`api::queues`) and the tools
//! `queues.*` answer these.

use serde::{Deserialize, Serialize};

/// A queue as the page shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QueueView {
    pub name: String,
    pub paused: bool,
    /// (state, how many), in the states' order; every state present.
    pub counts: Vec<(String, i64)>,
    pub finished_last_5m: i64,
    /// How long the oldest available job has waited, in words ("42 s", "3 min");
    /// `None` when none waits.
    pub oldest_available: Option<String>,
}

#[cfg(feature = "ssr")]
pub use operations::*;

#[cfg(feature = "ssr")]
mod operations {
    use serde::Serialize;
    use standmeet_jobs::QueueSummary;

    use super::*;
    use crate::error::AppError;
    use crate::model::JobState;
    use crate::ops::{Done, Operator};
    use crate::state::AppState;

    /// The queues as `queues.list` gives them: `{"queues": [summary…]}`, with counts by
    /// state and the oldest available job's age in seconds.
    #[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
    pub struct QueueList {
        pub queues: Vec<QueueSummary>,
    }

    /// Every queue, by name.
    pub async fn list(state: &AppState, _by: Operator) -> Result<QueueList, AppError> {
        Ok(QueueList {
            queues: state.jobs.queues().await?,
        })
    }

    /// Every queue as the page shows it (counts in the states' order, ages in words).
    pub async fn page(state: &AppState, by: Operator) -> Result<Vec<QueueView>, AppError> {
        Ok(list(state, by)
            .await?
            .queues
            .into_iter()
            .map(view)
            .collect())
    }

    fn view(queue: QueueSummary) -> QueueView {
        QueueView {
            counts: JobState::ALL
                .iter()
                .map(|state| {
                    let name = state.as_str();
                    (
                        name.to_string(),
                        queue.counts.get(name).copied().unwrap_or(0),
                    )
                })
                .collect(),
            name: queue.name,
            paused: queue.paused,
            finished_last_5m: queue.finished_last_5m,
            oldest_available: queue.oldest_available_age_s.map(age_in_words),
        }
    }

    /// Pauses (its jobs wait, in every process, until resumed; it survives restarts)
    /// or resumes a queue; answers the queue as `queues.list` shows it.
    pub async fn set_paused(
        state: &AppState,
        by: Operator,
        queue: &str,
        paused: bool,
    ) -> Result<Done<QueueSummary>, AppError> {
        let changed = if paused {
            state.jobs.pause_queue(queue).await
        } else {
            state.jobs.resume_queue(queue).await
        }?;
        tracing::info!(queue = %changed.name, paused, ?by, "a queue was paused or resumed");
        let message = if paused {
            format!(
                "Queue {} paused: its jobs wait until you resume it.",
                changed.name
            )
        } else {
            format!("Queue {} resumed.", changed.name)
        };
        Ok(Done {
            view: changed,
            message,
        })
    }

    /// A wait as a person reads it: seconds under two minutes, then minutes, hours, days.
    pub fn age_in_words(seconds: f64) -> String {
        let seconds = seconds.max(0.0).round() as u64;
        match seconds {
            0..120 => format!("{seconds} s"),
            120..7_200 => format!("{} min", seconds / 60),
            7_200..172_800 => format!("{} h", seconds / 3_600),
            _ => format!("{} days", seconds / 86_400),
        }
    }
}

#[cfg(all(test, feature = "ssr"))]
mod tests {
    use super::age_in_words;

    #[test]
    fn ages_read_as_words() {
        assert_eq!(age_in_words(-1.0), "0 s");
        assert_eq!(age_in_words(42.4), "42 s");
        assert_eq!(age_in_words(119.0), "119 s");
        assert_eq!(age_in_words(185.0), "3 min");
        assert_eq!(age_in_words(3.0 * 3600.0), "3 h");
        assert_eq!(age_in_words(3.0 * 86_400.0), "3 days");
    }
}
