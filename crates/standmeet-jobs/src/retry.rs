//! The retry policy, and what an attempt's result makes of its job. Pure functions,
//! so the rules can be tested without a database. (The backoff's formula itself is the
//! database's `job_backoff`, which every writer of a failed attempt uses, the rescuer's
//! set-based statements included: see `store::Delay`.)

use std::time::Duration;

use super::JobState;
use super::kind::{ErrorAction, JobError};
use super::store::{Delay, MAX_DELAY, Outcome, OutputJson};

/// How one attempt ended, as the executor saw it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum AttemptResult {
    /// The handler returned its output.
    Succeeded(OutputJson),
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
pub(crate) struct Plan {
    pub state: JobState,
    pub output: Option<OutputJson>,
    pub error: Option<String>,
    pub delay: Option<Delay>,
    /// Not a try: the attempt number goes back down (a snooze, a shutdown).
    pub give_back_attempt: bool,
}

/// The job's next state after attempt `attempt` of `max_attempts` ended with `result`.
/// `None` when there is nothing to write (the handler completed it itself, or the job
/// is no longer this process's). Every delay is at most [`MAX_DELAY`]; a plain retry
/// waits the backoff with unit `retry_base`.
pub(crate) fn plan(
    result: AttemptResult,
    attempt: i16,
    max_attempts: i16,
    retry_base: Duration,
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
            delay: Some(Delay::After(Duration::ZERO)),
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
                delay: Some(Delay::After(after.min(MAX_DELAY))),
                ..plain(JobState::Retryable)
            },
            ErrorAction::Retry => Plan {
                error: Some(message),
                delay: Some(Delay::Backoff { base: retry_base }),
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
                delay: Some(Delay::After(after.min(MAX_DELAY))),
                give_back_attempt: true,
                ..plain(JobState::Scheduled)
            },
        },
    })
}

/// What to record instead of `outcome` when the database refuses to store it (an
/// output it cannot hold, a limit it keeps hitting): a failed attempt with `reason`,
/// retried after the backoff or discarded when it was the last, so that the job is
/// neither stuck nor run again forever.
pub(crate) fn unwritable(outcome: &Outcome, reason: String, retry_base: Duration) -> Outcome {
    let last = outcome.attempt >= outcome.max_attempts;
    Outcome {
        state: if last {
            JobState::Discarded
        } else {
            JobState::Retryable
        },
        output: None,
        error: Some(reason),
        delay: (!last).then_some(Delay::Backoff { base: retry_base }),
        give_back_attempt: false,
        ..outcome.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: Duration = Duration::from_secs(1);

    #[test]
    fn every_delay_a_handler_asks_for_is_capped_like_the_backoff() {
        for error in [
            JobError::retry_after(Duration::from_millis(9_000_000_000_000_000_000), "later"),
            JobError::snooze(Duration::MAX, "much later"),
        ] {
            let plan = plan(AttemptResult::Failed(error), 1, 25, BASE).unwrap();
            assert_eq!(plan.delay, Some(Delay::After(MAX_DELAY)));
        }
    }

    #[test]
    fn a_lost_lease_writes_nothing() {
        assert_eq!(plan(AttemptResult::LeaseLost, 1, 3, BASE), None);
    }

    #[test]
    fn success_completes_with_the_output() {
        let plan = plan(
            AttemptResult::Succeeded(OutputJson::of(&serde_json::json!({"ok": 1})).unwrap()),
            1,
            3,
            BASE,
        )
        .unwrap();
        assert_eq!(plan.state, JobState::Completed);
        assert_eq!(
            plan.output.as_ref().map(OutputJson::as_str),
            Some(r#"{"ok":1}"#)
        );
        assert_eq!(plan.error, None);
    }

    #[test]
    fn a_completion_inside_the_handler_needs_no_write() {
        assert_eq!(
            plan(AttemptResult::CompletedInTransaction, 1, 3, BASE),
            None
        );
    }

    #[test]
    fn a_failure_retries_until_the_last_attempt_then_discards() {
        let failed = || AttemptResult::Failed(JobError::retry("boom"));
        let early = plan(failed(), 2, 3, BASE).unwrap();
        assert_eq!(early.state, JobState::Retryable);
        assert_eq!(early.delay, Some(Delay::Backoff { base: BASE }));
        assert_eq!(early.error.as_deref(), Some("boom"));
        let last = plan(failed(), 3, 3, BASE).unwrap();
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
            )
            .unwrap()
        };
        assert_eq!(failed(1).state, JobState::Retryable);
        assert_eq!(
            failed(1).delay,
            Some(Delay::After(Duration::from_secs(3600)))
        );
        assert_eq!(failed(3).state, JobState::Discarded);
    }

    #[test]
    fn discard_cancel_and_snooze_do_what_they_say() {
        let discard = plan(
            AttemptResult::Failed(JobError::discard("bad args")),
            1,
            25,
            BASE,
        )
        .unwrap();
        assert_eq!(discard.state, JobState::Discarded);
        let cancel = plan(
            AttemptResult::Failed(JobError::cancel("not wanted")),
            1,
            25,
            BASE,
        )
        .unwrap();
        assert_eq!(cancel.state, JobState::Cancelled);
        let snooze = plan(
            AttemptResult::Failed(JobError::snooze(Duration::from_secs(30), "throttled")),
            1,
            25,
            BASE,
        )
        .unwrap();
        assert_eq!(snooze.state, JobState::Scheduled);
        assert_eq!(snooze.delay, Some(Delay::After(Duration::from_secs(30))));
        assert!(
            snooze.give_back_attempt,
            "a snooze does not use up an attempt"
        );
        assert_eq!(snooze.error, None);
    }

    #[test]
    fn cancel_while_running_and_shutdown_are_told_apart() {
        let cancelled = plan(AttemptResult::CancelledWhileRunning, 1, 25, BASE).unwrap();
        assert_eq!(cancelled.state, JobState::Cancelled);
        let interrupted = plan(AttemptResult::Interrupted, 25, 25, BASE).unwrap();
        assert_eq!(
            interrupted.state,
            JobState::Retryable,
            "even on the last attempt"
        );
        assert!(interrupted.give_back_attempt);
    }

    #[test]
    fn an_unwritable_outcome_is_a_failed_attempt_retried_or_on_the_last_discarded() {
        let outcome = |attempt| Outcome {
            id: crate::JobId(7),
            attempt,
            max_attempts: 3,
            state: JobState::Completed,
            output: Some(OutputJson::of(&serde_json::json!({"too": "big"})).unwrap()),
            error: None,
            delay: None,
            give_back_attempt: false,
        };
        let early = unwritable(&outcome(1), "refused".into(), BASE);
        assert_eq!(early.state, JobState::Retryable);
        assert_eq!(early.delay, Some(Delay::Backoff { base: BASE }));
        assert_eq!(
            (early.output, early.error.as_deref()),
            (None, Some("refused"))
        );
        let last = unwritable(&outcome(3), "refused".into(), BASE);
        assert_eq!((last.state, last.delay), (JobState::Discarded, None));
    }
}
