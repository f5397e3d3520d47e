//! The overview (`/admin`): what needs an admin's attention, each figure read where it
//! is cheap to read whatever the number of jobs kept. Finished jobs come from the
//! engine's summaries, unfinished ones through their index (they are few), and the rest
//! from small tables (requests waiting, endpoints, bookings to come).

use serde::{Deserialize, Serialize};

/// Everything the overview shows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Overview {
    /// Jobs discarded (out of attempts, or refused for good) this minute and the 59
    /// before it.
    pub failed_last_hour: i64,
    /// Jobs waiting for another attempt after a failed one.
    pub retrying: i64,
    /// Access requests nobody decided yet.
    pub requests_waiting: i64,
    /// How long the oldest of them has waited, in words.
    pub oldest_request: Option<String>,
    pub disabled_webhooks: Vec<DisabledWebhook>,
    pub paused_queues: Vec<String>,
    pub queues: Vec<QueueWaiting>,
    pub next_bookings: Vec<NextBooking>,
    /// The owner's time zone, which the bookings' times are in.
    pub owner_timezone: String,
}

/// A webhook endpoint that no longer receives deliveries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DisabledWebhook {
    pub id: i64,
    pub url: String,
    pub reason: Option<String>,
}

/// A queue's backlog: how many jobs are due and how long the oldest has waited.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueWaiting {
    pub name: String,
    pub paused: bool,
    pub available: i64,
    pub oldest_available: Option<String>,
    /// The oldest due job has waited longer than `BEHIND_AFTER_S` (a minute): the queue does not
    /// keep up (or is paused).
    pub behind: bool,
}

/// A confirmed booking still to come.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NextBooking {
    pub id: i64,
    pub name: String,
    pub topic: String,
    /// "Monday 7 December 2026, 09:00–09:30 (Europe/Berlin)".
    pub when: String,
}

/// How long a queue's oldest due job may wait before the queue counts as falling
/// behind: the standard queues poll every second and are woken at once, so a minute is
/// far past what a queue that keeps up shows.
#[cfg(feature = "ssr")]
pub const BEHIND_AFTER_S: f64 = 60.0;

/// How many bookings to come the overview lists.
#[cfg(feature = "ssr")]
pub const NEXT_BOOKINGS: i64 = 5;

#[cfg(feature = "ssr")]
pub use operations::*;

#[cfg(feature = "ssr")]
mod operations {
    use crate::error::AppError;
    use crate::ops::Operator;

    use super::*;
    use crate::domain::bookings;
    use crate::domain::{access_requests, webhooks};
    use crate::model::JobState;
    use crate::ops::queues::age_in_words;
    use crate::state::AppState;

    /// Everything the overview shows, each figure read where it is cheap.
    pub async fn overview(state: &AppState, _by: Operator) -> Result<Overview, AppError> {
        let now = jiff::Timestamp::now();
        // Independent reads, at once: the page is as quick as the slowest.
        let (finished, queues, waiting, endpoints, upcoming) = tokio::try_join!(
            async {
                state
                    .jobs
                    .finished_per_minute()
                    .await
                    .map_err(AppError::from)
            },
            async { state.jobs.queues().await.map_err(AppError::from) },
            async {
                access_requests::waiting(&state.pool)
                    .await
                    .map_err(AppError::from)
            },
            async { webhooks::list(&state.pool).await.map_err(AppError::from) },
            async {
                bookings::upcoming_confirmed(&state.pool, now, NEXT_BOOKINGS)
                    .await
                    .map_err(AppError::from)
            },
        )?;
        let failed_last_hour = finished
            .iter()
            .filter(|minute| minute.state == JobState::Discarded)
            .map(|minute| minute.finished)
            .sum();
        let count_of = |queue: &standmeet_jobs::QueueSummary, state: JobState| {
            queue.counts.get(state.as_str()).copied().unwrap_or(0)
        };
        let retrying = queues
            .iter()
            .map(|queue| count_of(queue, JobState::Retryable))
            .sum();
        let tz = &state.settings.timezone;
        Ok(Overview {
            failed_last_hour,
            retrying,
            requests_waiting: waiting.count,
            oldest_request: waiting.oldest_age_s.map(age_in_words),
            disabled_webhooks: endpoints
                .into_iter()
                .filter(|endpoint| !endpoint.enabled)
                .map(|endpoint| DisabledWebhook {
                    id: endpoint.id,
                    url: endpoint.url,
                    reason: endpoint.disabled_reason,
                })
                .collect(),
            paused_queues: queues
                .iter()
                .filter(|queue| queue.paused)
                .map(|queue| queue.name.clone())
                .collect(),
            queues: queues
                .iter()
                .map(|queue| QueueWaiting {
                    name: queue.name.clone(),
                    paused: queue.paused,
                    available: count_of(queue, JobState::Available),
                    oldest_available: queue.oldest_available_age_s.map(age_in_words),
                    behind: queue
                        .oldest_available_age_s
                        .is_some_and(|age| age > BEHIND_AFTER_S),
                })
                .collect(),
            next_bookings: upcoming
                .into_iter()
                .map(|booking| NextBooking {
                    id: booking.id,
                    when: bookings::owner_when(tz, &booking),
                    name: booking.name,
                    topic: booking.topic,
                })
                .collect(),
            owner_timezone: bookings::zone_name(tz),
        })
    }
}
