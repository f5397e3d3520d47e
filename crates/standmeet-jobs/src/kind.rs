//! What a job type declares ([`JobKind`]), what its handler gets ([`JobContext`]) and
//! what it may answer ([`JobError`] for anything but success).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use sqlx::{PgConnection, PgPool};
use tokio_util::sync::CancellationToken;

use super::store;
use super::{JobClient, JobId};

/// A kind of job: its name, its queue, its limits, its arguments and output, and the
/// handler that runs it. The handler value itself holds whatever the job needs (a
/// mailer, a pool), so one `impl` is both the declaration and the code.
pub trait JobKind: Send + Sync + 'static {
    /// The `kind` column: stable, dotted, such as `access_request.approval_mail`.
    const KIND: &'static str;
    /// The queue its jobs go to.
    const QUEUE: &'static str = "default";
    /// Attempts before a failing job is discarded.
    const MAX_ATTEMPTS: i16 = 25;
    /// How long one attempt may take before it is stopped and counted as failed.
    const TIMEOUT: Duration = Duration::from_secs(60);
    /// 1 runs first, 4 last.
    const PRIORITY: i16 = 1;
    /// Whether a `running` job of this kind still holds its unique key (see
    /// [`JobClient::insert_unique_tx`]). `true`: an insert with the key of a
    /// running job is a duplicate of it. `false`: the running job gives its key up and
    /// the insert goes in, for work that must run again after a change that came while
    /// it ran (such a kind keeps two of its jobs from running at once itself, if it must).
    const UNIQUE_WHILE_RUNNING: bool = true;

    /// What an insert gives the job, stored as JSON.
    type Args: Serialize + DeserializeOwned + Send + 'static;
    /// What a completed attempt answers, stored as JSON.
    type Output: Serialize + Send + 'static;

    /// Runs one attempt. `Ok` completes the job with the output (unless the handler
    /// already completed it with [`JobContext::complete_tx`]); an error asks for a
    /// retry, a discard, a cancel or a snooze.
    fn run(
        &self,
        job: JobContext,
        args: Self::Args,
    ) -> impl Future<Output = Result<Self::Output, JobError>> + Send;
}

/// What a handler knows about the attempt it runs, and what it can do about it.
///
/// What the handler sees of its own job: a quick attempt runs inside the claim that
/// took it (see the crate's documentation), so until that claim commits, its row
/// reads `available` with the previous attempt's number to every other connection,
/// the handler's own queries included. Read the job's arguments from the handler's
/// parameters, not from the table; to finish the job together with a business write,
/// use [`JobContext::complete_tx`], which first has the claim written.
///
/// [`JobContext::pool`] is the engine's pool, shared with the claims of every queue:
/// hold a connection for a query or a transaction, not for a whole attempt.
#[derive(Clone)]
pub struct JobContext {
    /// The job this attempt runs.
    pub id: JobId,
    /// Its kind's name.
    pub kind: &'static str,
    /// This attempt's number, from 1.
    pub attempt: i16,
    /// The attempts it may take in all.
    pub max_attempts: i16,
    /// The engine's pool and this process's signals.
    pub(crate) jobs: JobClient,
    pub(crate) worker_id: Arc<str>,
    pub(crate) cancel: CancellationToken,
    pub(crate) completed_in_tx: Arc<AtomicBool>,
    /// The claim this attempt runs in, until it is written (see `claim`).
    pub(crate) claim: Option<Arc<super::claim::Claim>>,
}

impl JobContext {
    /// Whether an admin cancelled this job or the process is shutting down: a long
    /// handler should check now and then and stop early.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Resolves when [`is_cancelled`](Self::is_cancelled) becomes true.
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await
    }

    /// A pool for the handler's own queries.
    pub fn pool(&self) -> &PgPool {
        self.jobs.pool()
    }

    /// The queue, for a handler that inserts more jobs (in its own transaction, with
    /// [`JobClient::insert_tx`]) or reads them.
    pub fn jobs(&self) -> &JobClient {
        &self.jobs
    }

    /// Completes this job inside the handler's transaction `tx`, so that its business
    /// write and the job's `completed` commit together. Fenced: when the job is no
    /// longer running this attempt in this process (the rescuer took it back, an
    /// operator finished it), this fails and the handler's `?` rolls its transaction
    /// back.
    pub async fn complete_tx<O: Serialize>(
        &self,
        tx: &mut PgConnection,
        output: &O,
    ) -> Result<Completed, JobError> {
        let output = store::OutputJson::of(output)
            .map_err(|err| JobError::discard(format!("the output cannot be stored: {err}")))?;
        // A job still in its claim is `available` to every snapshot until the claim
        // commits: have it written `running` first.
        if let Some(claim) = &self.claim
            && !claim.until_written().await
        {
            return Err(JobError::retry(
                "the job's claim could not be written (the database went away)",
            ));
        }
        // Fenced like every outcome: only while this process still runs this attempt.
        let completed = store::Outcome {
            id: self.id,
            attempt: self.attempt,
            max_attempts: self.max_attempts,
            state: super::JobState::Completed,
            output: Some(output),
            error: None,
            delay: None,
            give_back_attempt: false,
        };
        let written =
            store::job_record_outcomes(&mut *tx, &self.worker_id, &[completed], &[]).await?;
        // The handler's transaction goes on: what else it changes is counted as usual.
        store::job_counts_by_trigger_again(&mut *tx).await?;
        if written.is_empty() {
            return Err(JobError::retry(
                "the job is no longer running this attempt (cancelled or rescued meanwhile)",
            ));
        }
        self.completed_in_tx.store(true, Ordering::Release);
        Ok(Completed(()))
    }
}

/// Proof that [`JobContext::complete_tx`] ran.
#[derive(Debug)]
pub struct Completed(());

/// What a failing attempt asks for.
#[derive(Clone, Debug, PartialEq)]
pub enum ErrorAction {
    /// Try again after the backoff (discarded once out of attempts).
    Retry,
    /// Try again after this long instead of the backoff (discarded once out of attempts).
    RetryAfter(Duration),
    /// Give up now: retrying cannot help.
    Discard,
    /// Stop for good, as `cancelled`.
    Cancel,
    /// Not a failure: run again after this long, without using up an attempt.
    Snooze(Duration),
}

/// A handler's answer other than success. Any error converts into a retry with its
/// message, so `?` does the usual thing.
#[derive(Clone, Debug, PartialEq)]
pub struct JobError {
    /// What becomes of the job.
    pub action: ErrorAction,
    /// Why, in words kept in the job's error history.
    pub message: String,
}

impl JobError {
    /// A failed attempt: the job runs again after the backoff, while it has attempts left.
    pub fn retry(message: impl Into<String>) -> Self {
        JobError {
            action: ErrorAction::Retry,
            message: message.into(),
        }
    }

    /// A failed attempt that runs again after `after` (at most a week), not the backoff.
    pub fn retry_after(after: Duration, message: impl Into<String>) -> Self {
        JobError {
            action: ErrorAction::RetryAfter(after),
            message: message.into(),
        }
    }

    /// A failure no retry mends: the job is `discarded` now.
    pub fn discard(message: impl Into<String>) -> Self {
        JobError {
            action: ErrorAction::Discard,
            message: message.into(),
        }
    }

    /// The job stops for good, as `cancelled`.
    pub fn cancel(message: impl Into<String>) -> Self {
        JobError {
            action: ErrorAction::Cancel,
            message: message.into(),
        }
    }

    /// Not a failure: the job runs again after `after`, and the attempt is given back.
    pub fn snooze(after: Duration, message: impl Into<String>) -> Self {
        JobError {
            action: ErrorAction::Snooze(after),
            message: message.into(),
        }
    }
}

/// `?` in a handler: any `std::error::Error` is a failed attempt to retry, in its words
/// and its causes' (each said once). anyhow's error is not one and does not convert: a
/// handler that has one says `JobError::retry(format!("{err:#}"))`.
impl<E: std::error::Error + 'static> From<E> for JobError {
    fn from(err: E) -> Self {
        JobError::retry(crate::error::error_chain(&err))
    }
}
