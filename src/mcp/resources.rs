//! Jobs as MCP resources, for an agent that holds a receipt: `standmeet://jobs/{id}`
//! reads a job as `tasks.get` answers it (`application/json`), and `resources/subscribe`
//! to it sends `notifications/resources/updated` once the job is finished, at once if it
//! is already.
//!
//! A subscription is woken by the engine's one LISTEN connection per process
//! ([`JobClient::finished_jobs`]): `standmeet_job_final` is sent by whichever copy of
//! StandMeet finished the job, so every copy hears it. It reads the job once when it
//! starts and once more when the job (or a possible gap in the news) is heard of; it
//! never polls, and it takes none of the waiters' slots (`STANDMEET_MAX_WAITERS`), which
//! are for the calls that wait.
//!
//! Subscriptions belong to the MCP session that made them and end with it; a session
//! holds at most [`MAX_SUBSCRIPTIONS`] unfinished ones. A subscription ends by itself
//! once its update is sent: a finished job does not change again.
//!
//! Clients of protocol version 2026-07-28, which has no sessions, subscribe with
//! `subscriptions/listen` instead ([`listen`]): one request that names up to
//! [`MAX_SUBSCRIPTIONS`] jobs and carries their updates until the client ends it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use rmcp::model::{
    ListResourceTemplatesResult, ReadResourceResult, ResourceContents, ResourceTemplate,
    ResourceUpdatedNotification, ResourceUpdatedNotificationParam, ServerNotification,
    SubscriptionFilter,
};
use rmcp::service::Peer;
use rmcp::service::SubscriptionContext;
use rmcp::{ErrorData, RoleServer};
use standmeet_jobs::listener::Finished;
use standmeet_jobs::{JobClient, JobId};
use tokio::task::AbortHandle;

use crate::error::AppError;
use crate::ops::{Operator, tasks};
use crate::state::AppState;

/// The jobs' URI template.
pub const JOB_URI_TEMPLATE: &str = "standmeet://jobs/{id}";

/// What every job URI starts with.
const JOB_URI_PREFIX: &str = "standmeet://jobs/";

/// The most unfinished subscriptions one MCP session holds; one more is refused with a
/// JSON-RPC error (invalid request) that says so.
pub const MAX_SUBSCRIPTIONS: usize = 100;

/// How long a subscription whose read failed (the database away) waits to read again
/// at first, and at most: the wait doubles from one to the other.
const READ_AGAIN_AFTER: Duration = Duration::from_secs(1);
const READ_AGAIN_AT_MOST: Duration = Duration::from_secs(30);

/// A job's resource URI.
pub fn job_uri(id: JobId) -> String {
    format!("{JOB_URI_PREFIX}{}", id.0)
}

/// The job a URI names, or an error that says what a job's URI looks like.
fn job_of(uri: &str) -> Result<JobId, ErrorData> {
    uri.strip_prefix(JOB_URI_PREFIX)
        .and_then(|id| id.parse::<i64>().ok())
        .filter(|id| *id > 0)
        .map(JobId)
        .ok_or_else(|| {
            ErrorData::invalid_params(
                format!("There is no resource {uri}: a job's is standmeet://jobs/<id>."),
                None,
            )
        })
}

/// An operation's refusal as a resource request's error: a job that is not there is
/// "resource not found", anything else is told as the pages tell it.
fn resource_error(err: AppError) -> ErrorData {
    match err {
        AppError::NotFound(message) => ErrorData::resource_not_found(message, None),
        other => ErrorData::internal_error(other.public_message(), None),
    }
}

/// The resource templates: jobs.
pub fn templates() -> ListResourceTemplatesResult {
    ListResourceTemplatesResult::with_all_items(vec![
        ResourceTemplate::new(JOB_URI_TEMPLATE, "job")
            .with_title("A job")
            .with_description(
                "A job (task) as tasks.get answers it: its kind, queue, state, attempts and \
                 last error. Subscribe to be told when it is finished.",
            )
            .with_mime_type("application/json"),
    ])
}

/// `resources/read` of a job.
pub async fn read(state: &AppState, uri: &str) -> Result<ReadResourceResult, ErrorData> {
    let id = job_of(uri)?;
    let row = tasks::get(state, Operator::Agent, id)
        .await
        .map_err(resource_error)?;
    let text = serde_json::to_string(&row).map_err(|err| {
        ErrorData::internal_error(format!("a job that does not serialize: {err}"), None)
    })?;
    Ok(ReadResourceResult::new(vec![
        ResourceContents::text(text, uri).with_mime_type("application/json"),
    ]))
}

/// One session's subscriptions: each a task that sends its update and ends. Dropped
/// with the session, it ends those still waiting.
#[derive(Debug, Default)]
pub struct Subscriptions {
    waiting: Mutex<HashMap<JobId, AbortHandle>>,
}

impl Subscriptions {
    /// `resources/subscribe`: once the job is finished (now, or when it is), `peer` is
    /// sent `notifications/resources/updated` for `uri`. Subscribing again to a job
    /// already followed changes nothing.
    pub async fn subscribe(
        &self,
        state: &AppState,
        uri: &str,
        peer: Peer<RoleServer>,
    ) -> Result<(), ErrorData> {
        let id = job_of(uri)?;
        // A job that is not there would never be finished: say so now.
        tasks::get(state, Operator::Agent, id)
            .await
            .map_err(resource_error)?;
        let mut waiting = self.waiting.lock().expect("not poisoned");
        waiting.retain(|_, task| !task.is_finished());
        if waiting.contains_key(&id) {
            return Ok(());
        }
        if waiting.len() >= MAX_SUBSCRIPTIONS {
            return Err(ErrorData::invalid_request(
                format!(
                    "This session follows {MAX_SUBSCRIPTIONS} unfinished jobs already, the \
                     most it may; unsubscribe from one first (or open another session)."
                ),
                None,
            ));
        }
        let jobs = state.jobs.clone();
        let uri = uri.to_string();
        let task = tokio::spawn(async move {
            if finished(&jobs, id).await {
                let updated = ResourceUpdatedNotificationParam::new(uri);
                // A client gone away has nobody to tell.
                let _ = peer.notify_resource_updated(updated).await;
            }
        });
        waiting.insert(id, task.abort_handle());
        Ok(())
    }

    /// `resources/unsubscribe`: the job is no longer followed (nothing if it was not).
    pub fn unsubscribe(&self, uri: &str) -> Result<(), ErrorData> {
        let id = job_of(uri)?;
        if let Some(task) = self.waiting.lock().expect("not poisoned").remove(&id) {
            task.abort();
        }
        Ok(())
    }
}

impl Drop for Subscriptions {
    fn drop(&mut self) {
        let waiting = self.waiting.get_mut().expect("not poisoned");
        for task in waiting.values() {
            task.abort();
        }
    }
}

/// What a `subscriptions/listen` request may follow: the job URIs among what it asked
/// for, at most [`MAX_SUBSCRIPTIONS`] of them.
pub fn accepted(requested: &SubscriptionFilter) -> SubscriptionFilter {
    let jobs: Vec<String> = requested
        .resource_subscriptions
        .iter()
        .flatten()
        .filter(|uri| job_of(uri).is_ok())
        .take(MAX_SUBSCRIPTIONS)
        .cloned()
        .collect();
    SubscriptionFilter::builder()
        .resource_subscriptions(jobs)
        .build()
}

/// A `subscriptions/listen` request: an update for each of its jobs once it is
/// finished, until the client ends the request.
pub async fn listen(state: &AppState, context: SubscriptionContext) -> Result<(), ErrorData> {
    let mut finishing: FuturesUnordered<_> = context
        .accepted()
        .resource_subscriptions
        .iter()
        .flatten()
        .filter_map(|uri| {
            let id = job_of(uri).ok()?;
            let (jobs, uri) = (state.jobs.clone(), uri.clone());
            Some(async move { (finished(&jobs, id).await, uri) })
        })
        .collect();
    loop {
        tokio::select! {
            () = context.cancelled() => return Ok(()),
            next = finishing.next(), if !finishing.is_empty() => {
                if let Some((true, uri)) = next {
                    let updated = ResourceUpdatedNotification::new(
                        ResourceUpdatedNotificationParam::new(uri),
                    );
                    let sent = context
                        .sink()
                        .send(ServerNotification::ResourceUpdatedNotification(updated))
                        .await;
                    if sent.is_err() {
                        // The client ended the request meanwhile.
                        return Ok(());
                    }
                }
            }
        }
    }
}

/// Resolves once job `id` is finished: true, or false if it is gone (deleted) or the
/// process is stopping. It listens before it reads, so no news falls between the two.
async fn finished(jobs: &JobClient, id: JobId) -> bool {
    let mut news = jobs.finished_jobs();
    let mut read_again_after = READ_AGAIN_AFTER;
    loop {
        match jobs.get(id).await {
            Ok(Some(job)) if job.state.is_terminal() => return true,
            Ok(Some(_)) => read_again_after = READ_AGAIN_AFTER,
            Ok(None) => return false,
            Err(err) => {
                if read_again_after == READ_AGAIN_AFTER {
                    tracing::warn!(job.id = id.0, error = %err, "a job resource's subscription could not read its job; it reads again");
                }
                tokio::time::sleep(read_again_after).await;
                read_again_after = (read_again_after * 2).min(READ_AGAIN_AT_MOST);
                continue;
            }
        }
        loop {
            match news.next().await {
                Some(Finished::Job(finished)) if finished == id => break,
                Some(Finished::MayHaveMissed) => break,
                Some(Finished::Job(_)) => {}
                None => return false,
            }
        }
    }
}
