//! Writes attempt outcomes. It never waits on a timer: when idle it writes each outcome
//! as it comes; when busy, the outcomes that arrive while one write is in flight are
//! written together by the next, in one statement and one transaction. A write that
//! fails on a passing error (a dropped connection, a failover) is tried again.

use std::time::Duration;

use std::sync::Arc;

use sqlx::PgPool;
use tokio::sync::mpsc;

use super::listener::Signals;
use super::store::{self, Outcome};

/// The most outcomes written in one statement.
const MAX_BATCH: usize = 1_000;
/// How long a failing write is retried before its outcomes are left to the rescuer
/// (their jobs stay `running` until their lease runs out, then run again).
const GIVE_UP_AFTER: Duration = Duration::from_secs(60);

/// Starts the completer; it ends when every sender is dropped and all is written.
pub(crate) fn spawn(
    pool: PgPool,
    signals: Arc<Signals>,
) -> (mpsc::Sender<Outcome>, tokio::task::JoinHandle<()>) {
    let (sender, receiver) = mpsc::channel(MAX_BATCH * 4);
    let handle = tokio::spawn(run(pool, signals, receiver));
    (sender, handle)
}

async fn run(pool: PgPool, signals: Arc<Signals>, mut receiver: mpsc::Receiver<Outcome>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while let Some(first) = receiver.recv().await {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match receiver.try_recv() {
                Ok(outcome) => batch.push(outcome),
                Err(_) => break,
            }
        }
        let written = write(&pool, &batch).await;
        signals.add_recorded(written.len() as u64);
        // Committed: wake this process's waiters now, ahead of the notification.
        for outcome in batch
            .iter()
            .filter(|o| o.state.is_terminal() && written.contains(&o.id))
        {
            signals.waiters.job_finished(outcome.id);
        }
        batch.clear();
    }
}

/// Writes `batch`; answers the ids it changed.
async fn write(pool: &PgPool, batch: &[Outcome]) -> Vec<super::JobId> {
    let started = tokio::time::Instant::now();
    let mut delay = Duration::from_millis(20);
    loop {
        match store::job_record_outcomes(pool, batch).await {
            Ok(changed) => {
                if changed.len() < batch.len() {
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
                return changed;
            }
            Err(err) if started.elapsed() < GIVE_UP_AFTER => {
                tracing::warn!(error = %err, retry_in = ?delay, jobs = batch.len(), "cannot record job outcomes; trying again");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(2));
            }
            Err(err) => {
                tracing::error!(error = %err, jobs = batch.len(), "gave up recording job outcomes; the rescuer will take the jobs back");
                return Vec::new();
            }
        }
    }
}
