//! One attempt of one job: find its handler, run it (a panic is caught as an error,
//! not lost with the worker), within its timeout, stoppable by an
//! admin's cancel or by shutdown; then decide what to write.

use std::any::Any;
use std::borrow::Cow;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;
use std::time::Duration;

use futures_util::FutureExt;

use super::attempt::{AttemptContext, in_attempt};
use super::claim::Claim;
use super::client::JobClient;
use super::kind::{ErrorAction, JobContext, JobError};
use super::listener::{RunningJob, Signals, StopReason};
use super::registry::{ErasedHandler, Registry};
use super::retry::{self, AttemptResult};
use super::store::{FetchedJob, Outcome, OutputJson};
use super::trace;

/// How long a cancelled handler may take to wind down on its own before it is dropped.
const CANCEL_GRACE: Duration = Duration::from_secs(5);

/// What an attempt needs from its surroundings.
pub(crate) struct ExecutorContext {
    /// The engine's pool and this process's signals, as handlers see them
    /// ([`JobContext::jobs`]).
    pub jobs: JobClient,
    pub registry: Registry,
    pub signals: Arc<Signals>,
    pub retry_base: Duration,
    /// This process's worker id (`attempted_by`), which fences a handler's `complete_tx`.
    pub worker_id: Arc<str>,
}

/// How long a job of a kind this process has no handler for waits before it is
/// offered again. The producers do not fetch such jobs at all, so this is only the
/// answer for a registry that changed under a running producer.
const NO_HANDLER_WAIT: Duration = Duration::from_secs(60);

/// Runs one attempt of `job` and answers what to write (`None`: the handler already
/// completed the job in its own transaction, or this process lost the job; either way
/// there is nothing to write, and an attempt outside a claim is no longer held here).
/// `claim` is the claim the attempt runs in (see `claim`), if any: that claim decides
/// whether the attempt is held (`Claim::attempt_ended`), so it is not released here.
pub(crate) async fn execute(
    mut job: FetchedJob,
    context: &ExecutorContext,
    claim: Option<Arc<Claim>>,
    queue: &str,
) -> Option<Outcome> {
    let handler = context.registry.handler(&job.kind);
    // What the attempt's log lines name (not a span: see `attempt`).
    let attempt = AttemptContext {
        id: job.id,
        kind: match handler {
            Some((kind, _)) => Cow::Borrowed(kind),
            None => Cow::Owned(job.kind.clone()),
        },
        attempt: job.attempt,
    };
    let traces = trace::traces();
    let parent = job.trace_context.take();
    let attempt_run = async {
        let started = std::time::Instant::now();
        let in_claim = claim.is_some();
        let result = run_attempt(&mut job, handler, context, claim).await;
        log_result(&result, started.elapsed());
        let completed_in_transaction = result == AttemptResult::CompletedInTransaction;
        let lost = result == AttemptResult::LeaseLost;
        if completed_in_transaction {
            // The handler committed its completion: wake this process's waiters now.
            context.signals.add_recorded(1);
            context.signals.waiters.job_finished(job.id);
        }
        let plan = retry::plan(result, job.attempt, job.max_attempts, context.retry_base);
        if let Some(traces) = traces {
            let (outcome, error) = match &plan {
                Some(plan) => (plan.state.as_str(), plan.error.as_deref()),
                None if completed_in_transaction => ("completed", None),
                None if lost => ("lost", Some("this process no longer holds the job")),
                None => ("released", None),
            };
            traces.attempt_ended(&tracing::Span::current(), outcome, error);
        }
        let Some(plan) = plan else {
            if !in_claim {
                context.signals.release(job.id, job.attempt);
            }
            return None;
        };
        Some(Outcome {
            id: job.id,
            attempt: job.attempt,
            max_attempts: job.max_attempts,
            state: plan.state,
            output: plan.output,
            error: plan.error,
            delay: plan.delay,
            give_back_attempt: plan.give_back_attempt,
        })
    };
    match traces {
        None => in_attempt(attempt, attempt_run).await,
        // Boxed, so that the span adds nothing to an untraced attempt's future.
        Some(traces) => {
            let span = traces.attempt_span(&attempt, queue, parent.as_deref());
            Box::pin(tracing::Instrument::instrument(
                in_attempt(attempt, attempt_run),
                span,
            ))
            .await
        }
    }
}

async fn run_attempt(
    job: &mut FetchedJob,
    handler: Option<(&'static str, &Arc<dyn ErasedHandler>)>,
    context: &ExecutorContext,
    claim: Option<Arc<Claim>>,
) -> AttemptResult {
    let Some((kind, handler)) = handler else {
        // Never a discard: another StandMeet (a newer version) may know the kind.
        return AttemptResult::Failed(JobError::snooze(
            NO_HANDLER_WAIT,
            format!(
                "no handler for the job kind {:?} in this StandMeet",
                job.kind
            ),
        ));
    };
    let running = context.signals.register_running(
        job.id,
        job.attempt,
        claim.as_ref().map(|claim| claim.serial),
    );
    let completed_in_tx = Arc::new(AtomicBool::new(false));
    let job_context = JobContext {
        id: job.id,
        kind,
        attempt: job.attempt,
        max_attempts: job.max_attempts,
        jobs: context.jobs.clone(),
        worker_id: context.worker_id.clone(),
        cancel: running.token.clone(),
        completed_in_tx: completed_in_tx.clone(),
        claim,
    };
    let timeout = handler.timeout();
    // The handler takes the arguments (nothing after it reads them).
    let args = std::mem::take(&mut job.args);
    let finished = |ran: Result<Result<OutputJson, JobError>, Box<dyn Any + Send>>| match ran {
        Ok(Ok(_)) if completed_in_tx.load(Ordering::Acquire) => {
            AttemptResult::CompletedInTransaction
        }
        Ok(Ok(output)) => AttemptResult::Succeeded(output),
        Ok(Err(error)) => AttemptResult::Failed(error),
        Err(panic) => AttemptResult::Failed(JobError::retry(format!(
            "the handler panicked: {}",
            panic_message(panic)
        ))),
    };

    // A handler that timed out or would not stop is dropped at the end of this block,
    // before the attempt counts as ended.
    let result = {
        // The handler runs in this task, its panic caught as a failed attempt (not lost
        // with the worker): what a task of its own would give, without a second task for
        // every job.
        let mut handler_run =
            std::pin::pin!(AssertUnwindSafe(handler.run(job_context, args)).catch_unwind());

        // Most jobs of a busy queue finish in their first poll: try that before arming
        // the timeout, whose timer (a clock read, an entry in the timer wheel and its
        // removal) costs more than such a job. A stop that came first goes the long way,
        // where it is seen before the handler's answer.
        if !running.token.is_cancelled()
            && let Poll::Ready(ran) = poll_once(handler_run.as_mut()).await
        {
            let result = finished(ran);
            context.signals.unregister_running(job.id, &running);
            return result;
        }

        // Boxed: only an attempt that did not end in its first poll needs what waits
        // for it (a timer, the stop's and the grace's futures), and in the attempt's own
        // future it would make every quick job's task that much larger to allocate and
        // move.
        Box::pin(wait_for_handler(
            handler_run.as_mut(),
            &running,
            timeout,
            finished,
        ))
        .await
    };
    context.signals.unregister_running(job.id, &running);
    result
}

/// Waits for a handler that did not end in its first poll: its answer, or its timeout,
/// or a stop (an admin's cancel, a shutdown, a lost lease), after which it has
/// [`CANCEL_GRACE`] to end on its own.
async fn wait_for_handler<H>(
    mut handler_run: Pin<&mut H>,
    running: &RunningJob,
    timeout: Duration,
    finished: impl Fn(H::Output) -> AttemptResult,
) -> AttemptResult
where
    H: Future,
{
    tokio::select! {
        // A stop first: a handler that ends because it saw the stop (a sleep that
        // answers "stopped") is ready in the same poll, and its answer must be
        // read for the stop's reason (a shutdown gives the attempt back).
        biased;
        _ = running.token.cancelled() => {
            // The handler sees the cancel too; give it a moment to finish on its own.
            let result = match tokio::time::timeout(CANCEL_GRACE, handler_run.as_mut()).await {
                Ok(ran) => finished(ran),
                Err(_) => AttemptResult::Failed(JobError::cancel("stopped")),
            };
            match (result, running.reason()) {
                // It finished its work after all: that stands.
                (done @ (AttemptResult::Succeeded(_) | AttemptResult::CompletedInTransaction), _) => done,
                (_, StopReason::Shutdown) => AttemptResult::Interrupted,
                (_, StopReason::LeaseLost) => AttemptResult::LeaseLost,
                _ => AttemptResult::CancelledWhileRunning,
            }
        }
        ran = handler_run.as_mut() => finished(ran),
        _ = tokio::time::sleep(timeout) => {
            AttemptResult::Failed(JobError::retry(format!("timed out after {timeout:?}")))
        }
    }
}

/// Polls `future` once: its answer if it has one, without waiting.
async fn poll_once<F: Future + Unpin>(mut future: F) -> Poll<F::Output> {
    std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut future).poll(cx))).await
}

fn panic_message(payload: Box<dyn Any + Send>) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        text.to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "(no message)".to_string()
    }
}

fn log_result(result: &AttemptResult, took: Duration) {
    match result {
        AttemptResult::Succeeded(_) | AttemptResult::CompletedInTransaction => {
            tracing::debug!(took_ms = took.as_millis() as u64, "attempt succeeded")
        }
        // A snooze is the handler choosing to wait (its attempt given back), not a failure.
        AttemptResult::Failed(error) if matches!(error.action, ErrorAction::Snooze(_)) => {
            tracing::debug!(took_ms = took.as_millis() as u64, action = ?error.action, reason = %error.message, "attempt snoozed")
        }
        AttemptResult::Failed(error) => {
            tracing::warn!(took_ms = took.as_millis() as u64, action = ?error.action, error = %error.message, "attempt failed")
        }
        AttemptResult::CancelledWhileRunning => tracing::info!("attempt cancelled by an admin"),
        AttemptResult::Interrupted => tracing::info!("attempt interrupted by shutdown"),
        AttemptResult::LeaseLost => {
            tracing::warn!(
                "attempt stopped: this process no longer holds the job (it was taken back)"
            )
        }
    }
}
