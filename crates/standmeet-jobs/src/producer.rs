//! One producer per queue: claims available jobs in batches, as many as it has free
//! workers, and runs them inside the claim's transaction (see `claim`). It wakes when
//! the queue gets work (a notification), when a worker frees up, or at its poll
//! interval, whichever comes first.
//!
//! A nearly idle queue (nothing running, no claim open, and the last claim took fewer
//! than [`QUIET_CLAIM`] jobs) takes its next jobs in one call instead, `running` under a
//! lease (`claim::take_running`): one round trip where a claim takes four, which is
//! what the first job after a quiet spell waits for; the job's own task then writes
//! its outcome (`completer::write_at_once`), with no hand-over to the completer. A
//! claim that comes back full means work is piling up, and the next goes back to
//! batches.
//!
//! It looks for work only when there may be some: at start, when told of new work,
//! at its poll interval, and after a fetch that came back full. An attempt that ends
//! after a fetch that found the queue empty is no news (new work notifies), and a
//! fetch then would be a round trip that finds nothing, beside the outcome's write.
//!
//! A claim's attempts run together in one task ([`run_together`]), not a task each:
//! a quick job's whole attempt is then one poll inside that task, where spawning it
//! (an aligned allocation, a trip through the scheduler, a wake of the join set, often
//! of the other worker thread) cost more than the job. Handlers are async: one that
//! waits lets the others of its claim run meanwhile. The producer counts the attempts
//! running across its claims ([`InFlight`]) to know its room.
//!
//! On shutdown it stops fetching, lets running attempts finish until the grace period
//! ends, then stops the rest so that they become `retryable` (never lost).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::claim::{self, ClaimContext};
use super::completer;
use super::config::QueueConfig;
use super::executor::{self, ExecutorContext};
use super::listener::StopReason;
use super::store::Outcome;

/// The most jobs a nearly idle queue takes in one call (see the module documentation).
const QUIET_CLAIM: usize = 2;

pub(crate) struct ProducerContext {
    pub executor: ExecutorContext,
    /// The kinds this process has handlers for: the only ones it fetches.
    pub kinds: Vec<String>,
    pub shutdown_grace: Duration,
    /// What the claims need to write themselves.
    pub claim: Arc<ClaimContext>,
}

pub(crate) async fn run(
    queue: QueueConfig,
    context: Arc<ProducerContext>,
    outcomes: mpsc::Sender<Outcome>,
    stop: CancellationToken,
) {
    let wakeup = context.executor.signals.queue_wakeup(&queue.name);
    // What each attempt's span names its queue (see `trace`).
    let queue_name: Arc<str> = Arc::from(queue.name.as_str());
    // The tasks that run attempts: a claim's attempts together, or one quiet job.
    let mut running: JoinSet<()> = JoinSet::new();
    let in_flight = Arc::new(InFlight::default());
    // Open claims, each in one of the queue's claim slots (see `claim::open`).
    let mut claims: JoinSet<()> = JoinSet::new();
    let mut slots: HashMap<tokio::task::Id, usize> = HashMap::new();
    let mut fetch_failures = 0u32;
    let mut last_fetched = 0usize;
    // Whether the queue may have work this producer has not fetched yet (see the
    // module documentation).
    let mut may_have_work = true;
    // When the last fetch went out: the poll counts from it, not from the last time an
    // attempt ended, so that a busy queue still looks at its poll interval for work
    // nobody told it of.
    let mut looked_at = tokio::time::Instant::now();

    while !stop.is_cancelled() {
        // Let go of the tasks that ended (the room is counted by `in_flight`).
        while running.try_join_next().is_some() {}
        while let Some(ended) = claims.try_join_next_with_id() {
            slots.remove(&task_of(ended));
        }
        let room = queue.workers.saturating_sub(in_flight.count());
        let mut fetched_full_batch = false;
        let quiet = in_flight.count() == 0 && claims.is_empty() && last_fetched < QUIET_CLAIM;
        if !may_have_work || room == 0 {
            // Nothing to look for, or no room to take it: wait.
        } else if quiet {
            looked_at = tokio::time::Instant::now();
            let limit = room.min(QUIET_CLAIM);
            match claim::take_running(&context.claim, &queue.name, limit as i64, &context.kinds)
                .await
            {
                Ok(jobs) => {
                    fetch_failures = 0;
                    last_fetched = jobs.len();
                    fetched_full_batch = jobs.len() == limit;
                    may_have_work = fetched_full_batch;
                    for job in jobs {
                        let context = context.clone();
                        let outcomes = outcomes.clone();
                        let queue_name = queue_name.clone();
                        let counted = in_flight.started();
                        running.spawn(async move {
                            let _counted = counted;
                            let executor = &context.executor;
                            if let Some(outcome) =
                                executor::execute(job, executor, None, &queue_name).await
                            {
                                completer::write_at_once(
                                    executor.jobs.pool(),
                                    &executor.signals,
                                    &executor.worker_id,
                                    outcome,
                                    &outcomes,
                                )
                                .await;
                            }
                        });
                    }
                }
                Err(err) => {
                    fetch_failures += 1;
                    // Looked at again after the pause (longer with each failure).
                    may_have_work = false;
                    tracing::warn!(queue = %queue.name, error = %err, "cannot fetch jobs");
                }
            }
        } else if claims.len() < queue.claims_in_flight {
            looked_at = tokio::time::Instant::now();
            let slot = (0..queue.claims_in_flight)
                .find(|slot| !slots.values().any(|taken| taken == slot))
                .expect("fewer claims open than slots");
            match claim::open(
                &context.claim,
                &queue.name,
                queue.claims_in_flight,
                slot,
                room as i64,
                &context.kinds,
            )
            .await
            {
                Ok(claimed) => {
                    fetch_failures = 0;
                    let fetched = claimed.as_ref().map_or(0, |(_, jobs, _)| jobs.len());
                    last_fetched = fetched;
                    tracing::trace!(queue = %queue.name, room, fetched, "claimed");
                    fetched_full_batch = fetched == room;
                    may_have_work = fetched_full_batch;
                    if let Some((tx, jobs, this_claim)) = claimed {
                        let attempts: FuturesUnordered<_> = jobs
                            .into_iter()
                            .map(|job| {
                                let context = context.clone();
                                let outcomes = outcomes.clone();
                                let this_claim = this_claim.clone();
                                let queue_name = queue_name.clone();
                                let counted = in_flight.started();
                                async move {
                                    let _counted = counted;
                                    let (id, attempt) = (job.id, job.attempt);
                                    let outcome = executor::execute(
                                        job,
                                        &context.executor,
                                        Some(this_claim.clone()),
                                        &queue_name,
                                    )
                                    .await;
                                    this_claim
                                        .attempt_ended(
                                            id,
                                            attempt,
                                            outcome,
                                            &context.executor.signals,
                                            &outcomes,
                                        )
                                        .await;
                                }
                            })
                            .collect();
                        running.spawn(run_together(attempts));
                        let finishing = claims.spawn(claim::finish(
                            tx,
                            this_claim,
                            context.claim.clone(),
                            outcomes.clone(),
                        ));
                        slots.insert(finishing.id(), slot);
                    }
                }
                Err(err) => {
                    fetch_failures += 1;
                    // Looked at again after the pause (longer with each failure).
                    may_have_work = false;
                    tracing::warn!(queue = %queue.name, error = %err, "cannot fetch jobs");
                }
            }
        }
        if fetched_full_batch
            && in_flight.count() < queue.workers
            && claims.len() < queue.claims_in_flight
        {
            continue;
        }
        // After a failed fetch, wait longer (up to 5 s) before the next try.
        let pause = if fetch_failures > 0 {
            (queue.poll_interval * fetch_failures.min(50)).min(Duration::from_secs(5))
        } else {
            queue.poll_interval
        };
        tokio::select! {
            _ = stop.cancelled() => {}
            _ = wakeup.notified() => may_have_work = true,
            // (Only while there is nothing to look for: with work known and no room,
            // an attempt's end, the arm below, is what lets the producer take it.)
            _ = tokio::time::sleep_until(looked_at + pause), if !may_have_work => may_have_work = true,
            _ = in_flight.ended.notified() => {}
            Some(ended) = claims.join_next_with_id(), if !claims.is_empty() => {
                slots.remove(&task_of(ended));
            }
        }
    }

    // Shutting down: no more fetching. Let the running attempts finish in time…
    let deadline = tokio::time::Instant::now() + context.shutdown_grace;
    while in_flight.count() > 0 {
        tokio::select! {
            _ = in_flight.ended.notified() => {}
            _ = tokio::time::sleep_until(deadline) => break,
        }
    }
    // …then stop the rest; each records an "interrupted" outcome and ends.
    if in_flight.count() > 0 {
        tracing::info!(queue = %queue.name, jobs = in_flight.count(), "stopping attempts still running at shutdown");
        context
            .executor
            .signals
            .stop_all_running(StopReason::Shutdown);
        while running.join_next().await.is_some() {}
    }
    // The claims write what their attempts came to, and commit.
    while claims.join_next().await.is_some() {}
}

/// The attempts a producer's tasks run now, across its claims, and a wake for the
/// producer when one ends (it may have room again).
#[derive(Default)]
struct InFlight {
    count: AtomicUsize,
    ended: Notify,
}

impl InFlight {
    fn count(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }

    /// Counts one attempt more, until the answer is dropped: when the attempt ends,
    /// or when its task unwinds (a count that outlived its attempt would shrink the
    /// producer's room for good).
    fn started(self: &Arc<Self>) -> Counted {
        self.count.fetch_add(1, Ordering::AcqRel);
        Counted(self.clone())
    }
}

/// One attempt counted in [`InFlight`] while it lives.
struct Counted(Arc<InFlight>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.count.fetch_sub(1, Ordering::AcqRel);
        // A permit when the producer is not waiting: it looks at its room next turn.
        self.0.ended.notify_one();
    }
}

/// Runs a claim's attempts together in this task (each counts itself off as it ends).
async fn run_together<F: Future<Output = ()>>(mut attempts: FuturesUnordered<F>) {
    while attempts.next().await.is_some() {}
}

/// Which claim task ended, whether it returned or panicked (its slot is free either way).
fn task_of(ended: Result<(tokio::task::Id, ()), tokio::task::JoinError>) -> tokio::task::Id {
    ended.map_or_else(|err| err.id(), |(id, ())| id)
}
