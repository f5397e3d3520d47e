//! Jobs as tools: `tasks.get`, `tasks.list` (as the Tasks panel, `api::tasks`).

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{ErrorData, tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Tools, respond};
use crate::api::paging::parse_filter;
use crate::api::tasks::PAGE_SIZE;
use crate::error::AppError;
use standmeet_jobs::{JobFilter, JobId, JobState, JobSummary};

#[derive(Debug, Deserialize, JsonSchema)]
pub struct GetTaskParams {
    /// The id of the job.
    pub job_id: i64,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListTasksParams {
    /// Only jobs in this state: available, scheduled, running, retryable, completed,
    /// discarded or cancelled.
    pub state: Option<String>,
    /// Only jobs of this kind, such as access_request.approval_mail.
    pub kind: Option<String>,
    /// How many jobs, newest first (1 to 50; 20 when not given).
    pub limit: Option<i64>,
}

#[tool_router(router = tasks_tools, vis = "pub(super)")]
impl Tools {
    #[tool(
        name = "tasks.get",
        description = "The state of one job (a task): kind, queue, state, attempts, times and its last error."
    )]
    async fn tasks_get(
        &self,
        Parameters(params): Parameters<GetTaskParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let found = self.state.jobs.summaries(&[JobId(params.job_id)]).await;
        respond(match found.map(|jobs| jobs.into_iter().next()) {
            Ok(Some(job)) => Ok(task_json(job)),
            Ok(None) => Err(AppError::NotFound(format!(
                "There is no job {}.",
                params.job_id
            ))),
            Err(err) => Err(err.into()),
        })
    }

    #[tool(
        name = "tasks.list",
        description = "Jobs (tasks), newest first, optionally of one state and one kind."
    )]
    async fn tasks_list(
        &self,
        Parameters(params): Parameters<ListTasksParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let state = match parse_filter::<JobState>(params.state.as_deref()) {
            Ok(state) => state,
            Err(err) => return respond(Err(err)),
        };
        let limit = params.limit.unwrap_or(20);
        if !(1..=PAGE_SIZE).contains(&limit) {
            return respond(Err(AppError::BadRequest(format!(
                "limit must be from 1 to {PAGE_SIZE}; it was {limit}."
            ))));
        }
        let filter = JobFilter {
            state,
            kind: params
                .kind
                .map(|kind| kind.trim().to_string())
                .filter(|kind| !kind.is_empty()),
            ..Default::default()
        };
        let jobs = self.state.jobs.list(&filter, limit).await;
        respond(
            jobs.map_err(AppError::from).map(
                |jobs| json!({ "tasks": jobs.into_iter().map(task_json).collect::<Vec<_>>() }),
            ),
        )
    }
}

fn task_json(job: JobSummary) -> Value {
    let when = crate::api::when;
    json!({
        "id": job.id.0,
        "kind": job.kind,
        "queue": job.queue,
        "state": job.state,
        "attempt": job.attempt,
        "max_attempts": job.max_attempts,
        "created": when(job.created_at),
        "scheduled": when(job.scheduled_at),
        "finalized": job.finalized_at.map(when),
        "last_error": job.last_error,
    })
}
