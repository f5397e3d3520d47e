//! How an operation waits for its jobs: up to its limit, as the engine's one LISTEN hub
//! wakes it ([`JobClient::wait`]), and, when someone watches the wait, telling them
//! every second which jobs it waits for and stopping early when they no longer want
//! the answer.
//!
//! The watcher is an MCP call that carries a `progressToken` or may be cancelled
//! (`mcp::progress`). It is set around the whole operation with [`watched`], so the
//! operations keep one signature for every door: a page, which never waits, and a tool
//! call, which does.
//!
//! A wait that is stopped early ends as a receipt ([`WaitOutcome::Receipt`]), exactly as
//! one that ran out of time: the jobs go on, and the operation finishes as it would at
//! its limit (whether its answer still reaches anyone is the door's business).

use std::future::Future;
use std::time::Duration;

use standmeet_jobs::{Error, JobClient, JobId, WaitOutcome};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How often a watched wait says where it is: within the 2 s an agent's progress
/// notifications may be apart (docs/mcp.md).
pub const REPORT_EVERY: Duration = Duration::from_secs(1);

/// One report of a watched wait.
#[derive(Clone, Debug, PartialEq)]
pub struct Waiting {
    /// The jobs waited for: what the receipt will name.
    pub job_ids: Vec<JobId>,
    /// How long it has waited so far.
    pub waited: Duration,
    /// How long it waits at most.
    pub limit: Duration,
}

/// Someone watching the waits of an operation.
#[derive(Clone, Debug)]
pub struct Watch {
    /// Cancelled when the watcher no longer wants the answer: the wait ends at once, as
    /// a receipt.
    pub stop: CancellationToken,
    /// Where the reports go; a report that finds the channel full is dropped (the next
    /// one follows in a second).
    pub reports: mpsc::Sender<Waiting>,
}

tokio::task_local! {
    static WATCH: Watch;
}

/// Runs `operation` with `watch` watching every wait in it.
pub async fn watched<T>(watch: Watch, operation: impl Future<Output = T>) -> T {
    WATCH.scope(watch, operation).await
}

/// Waits until every job of `ids` is finished or `limit` passes, as
/// [`JobClient::wait`], reporting to the watch of [`watched`] if there is one.
pub async fn wait(jobs: &JobClient, ids: &[JobId], limit: Duration) -> Result<WaitOutcome, Error> {
    let Ok(watch) = WATCH.try_with(Watch::clone) else {
        return jobs.wait(ids, limit).await;
    };
    if watch.stop.is_cancelled() {
        return Ok(WaitOutcome::Receipt);
    }
    let started = Instant::now();
    let finished = jobs.wait(ids, limit);
    tokio::pin!(finished);
    // The first tick is at once: the watcher learns the job ids before anything else.
    let mut report = tokio::time::interval(REPORT_EVERY);
    // After a stall, the next report comes a second later, not in a burst.
    report.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            outcome = &mut finished => return outcome,
            () = watch.stop.cancelled() => return Ok(WaitOutcome::Receipt),
            _ = report.tick() => {
                let waiting = Waiting {
                    job_ids: ids.to_vec(),
                    waited: started.elapsed(),
                    limit,
                };
                let _ = watch.reports.try_send(waiting);
            }
        }
    }
}
