//! A tool call that waits for its jobs, as an agent sees it: while the operation waits
//! (`domain::waiting`), a call whose request carries a `progressToken` gets
//! `notifications/progress` every second, each naming the jobs and their resources. A
//! call the client cancels (`notifications/cancelled`; a call without a session also by
//! closing its connection) stops waiting at once. The protocol sends no answer to a
//! cancelled call, so what it had waited for is found from the progress messages, or
//! with `tasks.list`; the jobs go on either way.

use std::future::Future;

use rmcp::RoleServer;
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::RequestContext;
use tokio::sync::mpsc;

use super::resources::job_uri;
use crate::ops::waiting::{self, Waiting, Watch};

/// Runs a tool call with its request's progress token and cancellation watching every
/// wait of the operation it calls.
pub async fn watched<T>(context: &RequestContext<RoleServer>, call: impl Future<Output = T>) -> T {
    let token = context.meta.get_progress_token();
    let (reports, mut received) = mpsc::channel(4);
    let watch = Watch {
        stop: context.ct.clone(),
        reports,
    };
    let call = waiting::watched(watch, call);
    tokio::pin!(call);
    loop {
        tokio::select! {
            output = &mut call => return output,
            Some(waiting) = received.recv() => {
                if let Some(token) = &token {
                    // A client gone away is the call's cancellation, seen by the wait.
                    let _ = context.peer.notify_progress(progress(token, &waiting)).await;
                }
            }
        }
    }
}

/// One progress notification: seconds waited of the most, and in words which jobs it
/// waits for, so that a client that cancels knows what to ask about later.
fn progress(token: &ProgressToken, waiting: &Waiting) -> ProgressNotificationParam {
    let jobs: Vec<String> = waiting
        .job_ids
        .iter()
        .map(|id| format!("job {id} ({})", job_uri(*id)))
        .collect();
    let message = format!(
        "Waiting for {} ({} s of at most {} s); if you stop waiting, the work goes on.",
        jobs.join(", "),
        waiting.waited.as_secs(),
        waiting.limit.as_secs()
    );
    ProgressNotificationParam::new(token.clone(), waiting.waited.as_secs_f64())
        .with_total(waiting.limit.as_secs_f64())
        .with_message(message)
}
