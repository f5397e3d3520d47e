//! The queues page's server side: every queue's figures, and Pause / Resume (admins
//! only). The pause itself is the job engine's (`jobs::queues`).

use leptos::prelude::*;
use leptos::server_fn::codec::GetUrl;
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

/// Every queue, by name.
#[server(endpoint = "queues/list", input = GetUrl)]
pub async fn queues_overview() -> Result<Vec<QueueView>, ServerFnError> {
    server::overview().await
}

/// "Pause": the queue's jobs wait, in every process, until "Resume".
#[server(endpoint = "queues/pause")]
pub async fn pause_queue(queue: String) -> Result<String, ServerFnError> {
    server::set_paused(queue, true).await
}

/// "Resume": the jobs that waited run at once.
#[server(endpoint = "queues/resume")]
pub async fn resume_queue(queue: String) -> Result<String, ServerFnError> {
    server::set_paused(queue, false).await
}

/// A wait as a person reads it: seconds under two minutes, then minutes, hours, days.
#[cfg(feature = "ssr")]
pub fn age_in_words(seconds: f64) -> String {
    let seconds = seconds.max(0.0).round() as u64;
    match seconds {
        0..120 => format!("{seconds} s"),
        120..7_200 => format!("{} min", seconds / 60),
        7_200..172_800 => format!("{} h", seconds / 3_600),
        _ => format!("{} days", seconds / 86_400),
    }
}

#[cfg(feature = "ssr")]
mod server {
    use leptos::prelude::*;

    use super::*;
    use crate::api::auth::require_admin;
    use crate::api::replies::reply;
    use crate::model::JobState;
    use crate::state::AppState;
    use standmeet_jobs::QueueSummary;

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

    pub async fn overview() -> Result<Vec<QueueView>, ServerFnError> {
        require_admin().await?;
        let state = expect_context::<AppState>();
        let queues = state.jobs.queues().await.map_err(reply)?;
        Ok(queues.into_iter().map(view).collect())
    }

    pub async fn set_paused(queue: String, paused: bool) -> Result<String, ServerFnError> {
        let admin = require_admin().await?;
        let state = expect_context::<AppState>();
        let changed = if paused {
            state.jobs.pause_queue(&queue).await
        } else {
            state.jobs.resume_queue(&queue).await
        };
        let changed = changed.map_err(reply)?;
        tracing::info!(queue = %changed.name, paused, admin.id = admin.id, "a queue was paused or resumed");
        Ok(if paused {
            format!(
                "Queue {} paused: its jobs wait until you resume it.",
                changed.name
            )
        } else {
            format!("Queue {} resumed.", changed.name)
        })
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
