//! Writes attempt outcomes. It never waits on a timer: when idle it writes each outcome
//! as it comes; when busy, the outcomes that arrive while writes are in flight (up to
//! [`WRITERS`] at once) are written together by the next, in one statement and one
//! transaction.
//!
//! What can go wrong, and what it does about it:
//! - a passing error (a dropped connection, a failover, the database restarting): the
//!   batch is tried again, for up to [`GIVE_UP_AFTER`]; then its attempts are released,
//!   so the lease renewal stops keeping them alive and the rescuer takes their jobs back
//!   when the lease runs out (they run again: at least once, never lost);
//! - an error that would come back on every try (data the database refuses, a broken
//!   constraint, a limit, a statement timeout: see `store::refused_for_good`): one bad
//!   outcome must not hold up the others, so the batch is written one outcome at a
//!   time, and an outcome the database refuses is recorded as a failed attempt with the
//!   database's words instead.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;
use tokio::sync::mpsc;

use super::JobId;
use super::listener::Signals;
use super::retry;
use super::store::{self, Outcome, RecordedJob};
use super::try_again::TryAgain;

/// The most outcomes written in one statement.
const MAX_BATCH: usize = 1_000;
/// Batches written at once, each on its own connection. One statement at a time left
/// a core idle in a drain (the write of 1,000 outcomes takes longer than running them);
/// a second one in flight uses it.
const WRITERS: usize = 2;
/// How long a failing write is retried before its attempts are released to the rescuer.
const GIVE_UP_AFTER: Duration = Duration::from_secs(60);

/// What the completer needs besides its outcomes.
pub(crate) struct CompleterContext {
    pub pool: PgPool,
    pub signals: Arc<Signals>,
    /// This process's worker id: outcomes are fenced by it.
    pub worker_id: Arc<str>,
    pub retry_base: Duration,
}

/// Starts the completer; it ends when every sender is dropped and all is written.
pub(crate) fn spawn(
    context: CompleterContext,
) -> (mpsc::Sender<Outcome>, tokio::task::JoinHandle<()>) {
    let (sender, receiver) = mpsc::channel(MAX_BATCH * 4);
    let context = Arc::new(context);
    let receiver = Arc::new(tokio::sync::Mutex::new(receiver));
    let handle = tokio::spawn(async move {
        let writers: Vec<_> = (0..WRITERS)
            .map(|_| tokio::spawn(run(context.clone(), receiver.clone())))
            .collect();
        for writer in writers {
            let _ = writer.await;
        }
    });
    (sender, handle)
}

/// One writer: takes what has arrived (waiting for the first outcome), writes it, and
/// goes back for more. The writers take turns at the channel, so while one batch is
/// being written the next one gathers and goes out on another connection.
async fn run(
    context: Arc<CompleterContext>,
    receiver: Arc<tokio::sync::Mutex<mpsc::Receiver<Outcome>>>,
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    loop {
        {
            let mut receiver = receiver.lock().await;
            let Some(first) = receiver.recv().await else {
                return;
            };
            batch.push(first);
            while batch.len() < MAX_BATCH {
                match receiver.try_recv() {
                    Ok(outcome) => batch.push(outcome),
                    Err(_) => break,
                }
            }
        }
        let written = write(&context, &batch).await;
        context.signals.add_recorded(written as u64);
        // Written, fenced out or given up on: no longer ours to renew.
        context
            .signals
            .release_all(batch.iter().map(|o| (o.id, o.attempt)));
        batch.clear();
    }
}

/// Writes `batch` and, once committed, wakes this process's waiters of the jobs it
/// finished, ahead of the notification, with their rows as the write left them. (A
/// fenced-out or refused outcome wakes nobody; its job's real end notifies.) Answers
/// how many jobs it changed.
async fn write(context: &CompleterContext, batch: &[Outcome]) -> usize {
    let waiters = &context.signals.waiters;
    let mut again = TryAgain::until(tokio::time::Instant::now() + GIVE_UP_AFTER);
    loop {
        // Every outcome, whatever its state: an admin's cancel can turn a retry into
        // the end.
        let rows_coming = waiters.rows_coming(batch.iter().map(|o| o.id));
        match store::job_record_outcomes(
            &context.pool,
            &context.worker_id,
            batch,
            rows_coming.watched(),
        )
        .await
        {
            Ok(changed) => {
                let count = changed.len();
                log_skipped(batch, &changed);
                rows_coming.done(changed, batch);
                return count;
            }
            Err(err) if store::refused_for_good(&err) => {
                tracing::warn!(error = %err, jobs = batch.len(), "the database refused a batch of job outcomes; writing them one by one");
                let changed = write_one_by_one(context, batch, rows_coming.watched()).await;
                let count = changed.len();
                rows_coming.done(changed, batch);
                return count;
            }
            Err(err) => {
                // News of these jobs must not wait for the database to come back.
                drop(rows_coming);
                let Some(pause) = again.next_pause() else {
                    tracing::error!(error = %err, jobs = batch.len(), "gave up recording job outcomes; their leases are no longer renewed, and the rescuer will take the jobs back");
                    return 0;
                };
                tracing::warn!(error = %err, retry_in = ?pause, jobs = batch.len(), "cannot record job outcomes; trying again");
                tokio::time::sleep(pause).await;
            }
        }
    }
}

/// Writes the outcome of a nearly idle queue's job from the job's own task, at once:
/// the first job after a quiet spell does not wait for a hand-over to the completer's
/// task. One try: should it fail, the completer takes the outcome over (and retries, or
/// writes a refused outcome as a failed attempt, as for any other).
pub(crate) async fn write_at_once(
    pool: &PgPool,
    signals: &Signals,
    worker_id: &str,
    outcome: Outcome,
    completer: &mpsc::Sender<Outcome>,
) {
    let batch = std::slice::from_ref(&outcome);
    let rows_coming = signals.waiters.rows_coming(batch.iter().map(|o| o.id));
    match store::job_record_outcomes(pool, worker_id, batch, rows_coming.watched()).await {
        Ok(changed) => {
            let count = changed.len();
            log_skipped(batch, &changed);
            rows_coming.done(changed, batch);
            signals.add_recorded(count as u64);
            signals.release_all([(outcome.id, outcome.attempt)]);
        }
        Err(err) => {
            drop(rows_coming);
            tracing::debug!(job.id = outcome.id.0, error = %err, "cannot record a job outcome at once; the completer takes it over");
            // Fails only when the completer is gone, i.e. never before we are.
            let _ = completer.send(outcome).await;
        }
    }
}

/// Each outcome on its own, so that the one the database refuses does not take the
/// others down with it; that one is recorded as a failed attempt with the reason.
async fn write_one_by_one(
    context: &CompleterContext,
    batch: &[Outcome],
    watched: &[JobId],
) -> Vec<RecordedJob> {
    let mut changed = Vec::with_capacity(batch.len());
    for outcome in batch {
        let single = std::slice::from_ref(outcome);
        match store::job_record_outcomes(&context.pool, &context.worker_id, single, watched).await {
            Ok(written) => changed.extend(written),
            Err(err) if store::refused_for_good(&err) => {
                let reason = format!("the outcome of this attempt could not be recorded: {err}");
                let failed = retry::unwritable(outcome, reason, context.retry_base);
                let failed = std::slice::from_ref(&failed);
                match store::job_record_outcomes(&context.pool, &context.worker_id, failed, watched)
                    .await
                {
                    // Not handed to this batch's waiters: the batch planned another
                    // outcome for it. They hear of it as of any other write.
                    Ok(written) if !written.is_empty() => {
                        tracing::warn!(job.id = outcome.id.0, error = %err, "recorded a refused outcome as a failed attempt");
                    }
                    Ok(_) => {}
                    Err(err) => {
                        tracing::error!(job.id = outcome.id.0, error = %err, "cannot record a refused outcome; the rescuer will take the job back")
                    }
                }
            }
            Err(err) => {
                // A passing error in the middle: the rest goes to the rescuer rather
                // than holding up every queue while the database is away.
                tracing::warn!(job.id = outcome.id.0, error = %err, "cannot record a job outcome; the rescuer will take the job back");
            }
        }
    }
    changed
}

fn log_skipped(batch: &[Outcome], changed: &[RecordedJob]) {
    if changed.len() < batch.len() {
        let changed: HashSet<JobId> = changed.iter().map(|job| job.id).collect();
        let skipped: Vec<_> = batch
            .iter()
            .filter(|outcome| !changed.contains(&outcome.id))
            .map(|outcome| outcome.id.0)
            .collect();
        tracing::info!(
            ?skipped,
            "outcomes of jobs that were cancelled or rescued meanwhile were not written"
        );
    }
}
