//! Queues as an operator sees them: what each holds, how fast it is finishing work, how
//! long its oldest job has waited, and whether it is paused.
//!
//! A pause is a row in `job_queue_pauses`: every process's producer finds nothing to
//! claim in a paused queue (see `store::job_claim`), so its jobs stay
//! `available` in every copy of StandMeet and across restarts until it is resumed; the
//! resume notifies the queue, and its jobs run at once. Running jobs finish.

use std::collections::BTreeMap;

use serde::Serialize;

use super::store::{self, QueueStateCount};
use crate::{Error, JobState};

/// One queue's figures (the shape of MCP `queues.list`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct QueueSummary {
    /// The queue's name.
    #[cfg_attr(feature = "schemars", schemars(description = ""))]
    pub name: String,
    /// Whether it is paused: no process takes its jobs.
    #[cfg_attr(feature = "schemars", schemars(description = ""))]
    pub paused: bool,
    /// Jobs in each state, every state present (0 when none).
    pub counts: BTreeMap<&'static str, i64>,
    /// Its jobs finished in the last five minutes.
    #[cfg_attr(feature = "schemars", schemars(description = ""))]
    pub finished_last_5m: i64,
    /// Seconds since the oldest `available` job became due; `None` when none is waiting.
    pub oldest_available_age_s: Option<f64>,
}

/// Every queue: those this StandMeet runs (`configured`), and any other that has jobs
/// or a pause; by name.
pub(crate) async fn list(
    pool: &sqlx::PgPool,
    configured: &[String],
) -> Result<Vec<QueueSummary>, sqlx::Error> {
    let counts = store::queue_state_counts(pool).await?;
    let paused = store::queue_paused(pool).await?;
    Ok(summarize(configured, &counts, &paused))
}

/// Pauses or resumes `queue`, which must be one that [`list`] shows; answers its
/// figures afterwards.
pub(crate) async fn set_paused(
    pool: &sqlx::PgPool,
    configured: &[String],
    queue: &str,
    paused: bool,
) -> Result<QueueSummary, Error> {
    let queue = queue.trim();
    let before = list(pool, configured).await.map_err(Error::from_database)?;
    if !before.iter().any(|summary| summary.name == queue) {
        let name: String = queue.chars().take(64).collect();
        let known: Vec<String> = before.into_iter().map(|summary| summary.name).collect();
        return Err(Error::NotFound(format!(
            "There is no queue \"{name}\"; the queues are: {}.",
            known.join(", ")
        )));
    }
    if paused {
        store::queue_pause(pool, queue)
            .await
            .map_err(Error::from_database)?;
    } else {
        store::queue_resume(pool, queue)
            .await
            .map_err(Error::from_database)?;
    }
    // A pause moves no job: the figures just read stand, with the new flag.
    let mut summary = before
        .into_iter()
        .find(|summary| summary.name == queue)
        .expect("checked above");
    summary.paused = paused;
    Ok(summary)
}

fn summarize(
    configured: &[String],
    counts: &[QueueStateCount],
    paused: &[String],
) -> Vec<QueueSummary> {
    let mut queues: BTreeMap<String, QueueSummary> = BTreeMap::new();
    let names = configured
        .iter()
        .chain(paused)
        .chain(counts.iter().map(|row| &row.queue));
    for name in names {
        queues.entry(name.clone()).or_insert_with(|| QueueSummary {
            name: name.clone(),
            paused: paused.contains(name),
            counts: JobState::ALL
                .iter()
                .map(|state| (state.as_str(), 0))
                .collect(),
            finished_last_5m: 0,
            oldest_available_age_s: None,
        });
    }
    for row in counts {
        let summary = queues.get_mut(&row.queue).expect("every queue was added");
        summary.counts.insert(row.state.as_str(), row.count);
        summary.finished_last_5m += row.finished_last_5m;
        if row.state == JobState::Available {
            summary.oldest_available_age_s = row.oldest_due_age_s;
        }
    }
    queues.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_queue_shows_with_every_state_counted() {
        let counts = vec![
            QueueStateCount {
                queue: "mail".into(),
                state: JobState::Available,
                count: 3,
                finished_last_5m: 0,
                oldest_due_age_s: Some(12.5),
            },
            QueueStateCount {
                queue: "mail".into(),
                state: JobState::Completed,
                count: 7,
                finished_last_5m: 4,
                oldest_due_age_s: Some(900.0),
            },
            QueueStateCount {
                queue: "reports".into(),
                state: JobState::Discarded,
                count: 1,
                finished_last_5m: 1,
                oldest_due_age_s: Some(30.0),
            },
        ];
        let configured = vec!["default".to_string(), "mail".to_string()];
        let paused = vec!["mail".to_string()];
        let queues = summarize(&configured, &counts, &paused);
        let names: Vec<&str> = queues.iter().map(|q| q.name.as_str()).collect();
        assert_eq!(names, ["default", "mail", "reports"]);

        let mail = &queues[1];
        assert!(mail.paused);
        assert_eq!(mail.counts["available"], 3);
        assert_eq!(mail.counts["completed"], 7);
        assert_eq!(mail.counts["running"], 0);
        assert_eq!(mail.counts.len(), JobState::ALL.len());
        assert_eq!(mail.finished_last_5m, 4);
        // The age is the oldest *available* job's, not a finished one's.
        assert_eq!(mail.oldest_available_age_s, Some(12.5));

        let default = &queues[0];
        assert!(!default.paused);
        assert_eq!(default.counts.values().sum::<i64>(), 0);
        assert_eq!(default.oldest_available_age_s, None);
        assert_eq!(queues[2].oldest_available_age_s, None);
    }
}
