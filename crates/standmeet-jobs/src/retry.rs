//! The retry policy, and what an attempt's result makes of its job. Pure functions,
//! so the rules can be tested without a database.

use std::time::Duration;

use rand::Rng;

use super::JobState;
use super::kind::{ErrorAction, JobError};
use super::store::MAX_DELAY;

/// How long before attempt `attempt + 1`, after attempt `attempt` failed:
/// `base × attempt⁴`, give or take 10 % so that jobs that failed together do not all
/// come back in the same instant. `jitter` is in [0, 1): 0.5 means no change.
pub fn backoff(base: Duration, attempt: i16, jitter: f64) -> Duration {
    let attempt = f64::from(attempt.max(1));
    let factor = 0.9 + 0.2 * jitter.clamp(0.0, 1.0);
    // Capped (a week): past that, a retry is no longer what anybody waits for.
    let millis =
        (base.as_millis() as f64 * attempt.powi(4) * factor).min(MAX_DELAY.as_millis() as f64);
    Duration::from_millis(millis as u64)
}

/// How one attempt ended, as the executor saw it.
#[derive(Clone, Debug, PartialEq)]
pub enum AttemptResult {
    /// The handler returned its output.
    Succeeded(serde_json::Value),
    /// The handler completed the job in its own transaction (`complete_tx`).
    CompletedInTransaction,
    /// The handler returned an error (a panic and a timeout count as a retry).
    Failed(JobError),
    /// An admin cancelled it while it ran.
    CancelledWhileRunning,
    /// The process shut down before it finished.
    Interrupted,
    /// This process lost the job's lease (it was rescued, or the database was out of
    /// reach longer than the lease): whoever holds the job now records its outcome.
    LeaseLost,
}

/// What to write for the job: its next state and the columns that go with it.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub state: JobState,
    pub output: Option<serde_json::Value>,
    pub error: Option<String>,
    pub delay: Option<Duration>,
    /// Not a try: the attempt number goes back down (a snooze, a shutdown).
    pub give_back_attempt: bool,
}

/// The job's next state after attempt `attempt` of `max_attempts` ended with `result`.
/// `None` when there is nothing to write (the handler completed it itself, or the job
/// is no longer this process's). Every delay is at most [`MAX_DELAY`].
pub fn plan(
    result: AttemptResult,
    attempt: i16,
    max_attempts: i16,
    retry_base: Duration,
    jitter: f64,
) -> Option<Plan> {
    let plain = |state: JobState| Plan {
        state,
        output: None,
        error: None,
        delay: None,
        give_back_attempt: false,
    };
    Some(match result {
        AttemptResult::CompletedInTransaction | AttemptResult::LeaseLost => return None,
        AttemptResult::Succeeded(output) => Plan {
            output: Some(output),
            ..plain(JobState::Completed)
        },
        AttemptResult::CancelledWhileRunning => Plan {
            error: Some("cancelled by an admin while running".into()),
            ..plain(JobState::Cancelled)
        },
        AttemptResult::Interrupted => Plan {
            // Not the job's fault: it gets its attempt back and runs again soon.
            error: Some("interrupted: StandMeet shut down during the attempt".into()),
            delay: Some(Duration::ZERO),
            give_back_attempt: true,
            ..plain(JobState::Retryable)
        },
        AttemptResult::Failed(JobError { action, message }) => match action {
            ErrorAction::Retry | ErrorAction::RetryAfter(_) if attempt >= max_attempts => Plan {
                error: Some(message),
                ..plain(JobState::Discarded)
            },
            ErrorAction::RetryAfter(after) => Plan {
                error: Some(message),
                delay: Some(after.min(MAX_DELAY)),
                ..plain(JobState::Retryable)
            },
            ErrorAction::Retry => Plan {
                error: Some(message),
                delay: Some(backoff(retry_base, attempt, jitter)),
                ..plain(JobState::Retryable)
            },
            ErrorAction::Discard => Plan {
                error: Some(message),
                ..plain(JobState::Discarded)
            },
            ErrorAction::Cancel => Plan {
                error: Some(message),
                ..plain(JobState::Cancelled)
            },
            ErrorAction::Snooze(after) => Plan {
                delay: Some(after.min(MAX_DELAY)),
                give_back_attempt: true,
                ..plain(JobState::Scheduled)
            },
        },
    })
}

/// A fresh jitter value for [`backoff`] and [`plan`].
pub fn jitter() -> f64 {
    rand::rng().random::<f64>()
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: Duration = Duration::from_secs(1);

    #[test]
    fn backoff_grows_with_the_fourth_power_of_the_attempt() {
        assert_eq!(backoff(BASE, 1, 0.5), Duration::from_secs(1));
        assert_eq!(backoff(BASE, 2, 0.5), Duration::from_secs(16));
        assert_eq!(backoff(BASE, 3, 0.5), Duration::from_secs(81));
        assert_eq!(
            backoff(Duration::from_millis(10), 2, 0.5),
            Duration::from_millis(160)
        );
    }

    #[test]
    fn jitter_stays_within_ten_percent_either_way() {
        assert_eq!(backoff(BASE, 2, 0.0), Duration::from_millis(14_400));
        assert_eq!(backoff(BASE, 2, 1.0), Duration::from_millis(17_600));
        for _ in 0..1_000 {
            let delay = backoff(BASE, 2, jitter());
            assert!(
                delay >= Duration::from_millis(14_400) && delay <= Duration::from_millis(17_600),
                "{delay:?}"
            );
        }
    }

    #[test]
    fn backoff_is_capped_at_a_week() {
        assert_eq!(
            backoff(BASE, 1_000, 1.0),
            Duration::from_secs(7 * 24 * 3600)
        );
    }

    #[test]
    fn every_delay_a_handler_asks_for_is_capped_like_the_backoff() {
        for error in [
            JobError::retry_after(Duration::from_millis(9_000_000_000_000_000_000), "later"),
            JobError::snooze(Duration::MAX, "much later"),
        ] {
            let plan = plan(AttemptResult::Failed(error), 1, 25, BASE, 0.5).unwrap();
            assert_eq!(plan.delay, Some(MAX_DELAY));
        }
    }

    #[test]
    fn a_lost_lease_writes_nothing() {
        assert_eq!(plan(AttemptResult::LeaseLost, 1, 3, BASE, 0.5), None);
    }

    #[test]
    fn success_completes_with_the_output() {
        let plan = plan(
            AttemptResult::Succeeded(serde_json::json!({"ok": 1})),
            1,
            3,
            BASE,
            0.5,
        )
        .unwrap();
        assert_eq!(plan.state, JobState::Completed);
        assert_eq!(plan.output, Some(serde_json::json!({"ok": 1})));
        assert_eq!(plan.error, None);
    }

    #[test]
    fn a_completion_inside_the_handler_needs_no_write() {
        assert_eq!(
            plan(AttemptResult::CompletedInTransaction, 1, 3, BASE, 0.5),
            None
        );
    }

    #[test]
    fn a_failure_retries_until_the_last_attempt_then_discards() {
        let failed = || AttemptResult::Failed(JobError::retry("boom"));
        let early = plan(failed(), 2, 3, BASE, 0.5).unwrap();
        assert_eq!(early.state, JobState::Retryable);
        assert_eq!(early.delay, Some(Duration::from_secs(16)));
        assert_eq!(early.error.as_deref(), Some("boom"));
        let last = plan(failed(), 3, 3, BASE, 0.5).unwrap();
        assert_eq!(last.state, JobState::Discarded);
        assert_eq!(last.delay, None);
    }

    #[test]
    fn a_retry_can_name_its_own_delay() {
        let failed = |attempt| {
            plan(
                AttemptResult::Failed(JobError::retry_after(Duration::from_secs(3600), "later")),
                attempt,
                3,
                BASE,
                0.5,
            )
            .unwrap()
        };
        assert_eq!(failed(1).state, JobState::Retryable);
        assert_eq!(failed(1).delay, Some(Duration::from_secs(3600)));
        assert_eq!(failed(3).state, JobState::Discarded);
    }

    #[test]
    fn discard_cancel_and_snooze_do_what_they_say() {
        let discard = plan(
            AttemptResult::Failed(JobError::discard("bad args")),
            1,
            25,
            BASE,
            0.5,
        )
        .unwrap();
        assert_eq!(discard.state, JobState::Discarded);
        let cancel = plan(
            AttemptResult::Failed(JobError::cancel("not wanted")),
            1,
            25,
            BASE,
            0.5,
        )
        .unwrap();
        assert_eq!(cancel.state, JobState::Cancelled);
        let snooze = plan(
            AttemptResult::Failed(JobError::snooze(Duration::from_secs(30), "throttled")),
            1,
            25,
            BASE,
            0.5,
        )
        .unwrap();
        assert_eq!(snooze.state, JobState::Scheduled);
        assert_eq!(snooze.delay, Some(Duration::from_secs(30)));
        assert!(
            snooze.give_back_attempt,
            "a snooze does not use up an attempt"
        );
        assert_eq!(snooze.error, None);
    }

    #[test]
    fn cancel_while_running_and_shutdown_are_told_apart() {
        let cancelled = plan(AttemptResult::CancelledWhileRunning, 1, 25, BASE, 0.5).unwrap();
        assert_eq!(cancelled.state, JobState::Cancelled);
        let interrupted = plan(AttemptResult::Interrupted, 25, 25, BASE, 0.5).unwrap();
        assert_eq!(
            interrupted.state,
            JobState::Retryable,
            "even on the last attempt"
        );
        assert!(interrupted.give_back_attempt);
    }
}
