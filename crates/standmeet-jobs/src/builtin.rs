//! Job kinds every StandMeet has, for health checks, benchmarks and trying the queue
//! (an operator can insert them by hand and watch them in the Tasks panel).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::kind::{JobContext, JobError, JobKind};

/// `system.noop`: completes at once, with its arguments as output.
pub struct Noop;

impl JobKind for Noop {
    const KIND: &'static str = "system.noop";
    type Args = serde_json::Value;
    type Output = serde_json::Value;

    async fn run(
        &self,
        _job: JobContext,
        args: serde_json::Value,
    ) -> Result<serde_json::Value, JobError> {
        Ok(args)
    }
}

/// `system.sleep {ms}`: waits that long (stopping early when cancelled), then
/// completes with `{slept_ms}`. For trying timeouts, cancels and rescues.
pub struct Sleep;

#[derive(Debug, Serialize, Deserialize)]
/// `system.sleep`'s arguments.
pub struct SleepArgs {
    /// How long to sleep, in milliseconds.
    pub ms: u64,
}

#[derive(Debug, Serialize, Deserialize)]
/// `system.sleep`'s output.
pub struct SleepOutput {
    /// How long it slept, in milliseconds.
    pub slept_ms: u64,
}

impl JobKind for Sleep {
    const KIND: &'static str = "system.sleep";
    const TIMEOUT: Duration = Duration::from_secs(600);
    type Args = SleepArgs;
    type Output = SleepOutput;

    async fn run(&self, job: JobContext, args: SleepArgs) -> Result<SleepOutput, JobError> {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(args.ms)) => Ok(SleepOutput { slept_ms: args.ms }),
            _ = job.cancelled() => Err(JobError::cancel("stopped while sleeping")),
        }
    }
}

/// `system.flaky {fail_until_attempt, message?, retry_in_ms?}`: fails its attempts
/// before `fail_until_attempt` (with `message`; the next try after `retry_in_ms` when
/// given, else after the usual backoff), then completes with `{attempt}`. For trying
/// retries, the Tasks panel's error history and its Retry button.
pub struct Flaky;

#[derive(Debug, Serialize, Deserialize)]
/// `system.flaky`'s arguments.
pub struct FlakyArgs {
    /// The first attempt that completes; those before it fail.
    pub fail_until_attempt: i16,
    #[serde(default)]
    /// What a failing attempt says (a default sentence when none).
    pub message: Option<String>,
    #[serde(default)]
    /// The pause before the next try, in milliseconds; the usual backoff when none.
    pub retry_in_ms: Option<u64>,
}

#[derive(Debug, Serialize, Deserialize)]
/// `system.flaky`'s output.
pub struct FlakyOutput {
    /// The attempt that completed it.
    pub attempt: i16,
}

impl JobKind for Flaky {
    const KIND: &'static str = "system.flaky";
    type Args = FlakyArgs;
    type Output = FlakyOutput;

    async fn run(&self, job: JobContext, args: FlakyArgs) -> Result<FlakyOutput, JobError> {
        if job.attempt < args.fail_until_attempt {
            let message = format!(
                "{} (attempt {})",
                args.message.unwrap_or_else(|| "failed on purpose".into()),
                job.attempt
            );
            return Err(match args.retry_in_ms {
                Some(ms) => JobError::retry_after(Duration::from_millis(ms), message),
                None => JobError::retry(message),
            });
        }
        Ok(FlakyOutput {
            attempt: job.attempt,
        })
    }
}

/// The registry of the built-in kinds; the app adds its own to it.
pub fn registry() -> super::Registry {
    super::Registry::new()
        .register(Noop)
        .register(Sleep)
        .register(Flaky)
}
