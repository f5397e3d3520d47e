//! Access requests as tools: `access_requests.list`, `access_requests.approve` (as the
//! access requests page, `api::access`).

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{ErrorData, tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Tools, respond};
use crate::api::access::server::view as request_view;
use crate::api::paging::parse_filter;
use crate::domain::access_requests::{self, RequestStatus};
use crate::error::AppError;
use crate::model::MailState;
use standmeet_jobs::{JobState, WaitOutcome};

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ApproveParams {
    /// The id of the access request to approve.
    pub id: i64,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListRequestsParams {
    /// Only requests with this status: pending, approved, replied or denied.
    pub status: Option<String>,
}

#[tool_router(router = access_tools, vis = "pub(super)")]
impl Tools {
    #[tool(
        name = "access_requests.list",
        description = "List access requests, newest first, with their status and the state of their approval mail."
    )]
    async fn access_requests_list(
        &self,
        Parameters(params): Parameters<ListRequestsParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let status = match parse_filter::<RequestStatus>(params.status.as_deref()) {
            Ok(status) => status,
            Err(err) => return respond(Err(err)),
        };
        respond(
            access_requests::list(&self.state.pool, status, 200)
                .await
                .map_err(AppError::from)
                .map(|rows| {
                    let requests: Vec<Value> = rows
                        .into_iter()
                        .map(|row| {
                            let view = request_view(row);
                            json!({
                                "id": view.id,
                                "name": view.name,
                                "email": view.email,
                                "message": view.message,
                                "status": view.status,
                                "created": view.created,
                                "mail_state": view.mail_state,
                                "mail_job_id": view.mail_job_id,
                            })
                        })
                        .collect();
                    json!({ "requests": requests })
                }),
        )
    }

    #[tool(
        name = "access_requests.approve",
        description = "Approve a pending access request: the visitor is mailed an access code. Waits briefly for the mail; if it has not gone out yet the answer says pending:true, and tasks.get with mail_job_id tells when it has."
    )]
    async fn access_requests_approve(
        &self,
        Parameters(params): Parameters<ApproveParams>,
    ) -> Result<CallToolResult, ErrorData> {
        respond(self.approve(params.id).await)
    }
}

impl Tools {
    /// `access_requests.approve`: approves, then waits up to `STANDMEET_APPROVE_WAIT_MS`
    /// for the mail, and says whether it went out.
    async fn approve(&self, id: i64) -> Result<Value, AppError> {
        let state = &self.state;
        let job =
            access_requests::approve(&state.pool, &state.jobs, &state.mailer, id, None).await?;
        tracing::info!(
            request.id = id,
            job.id = job.0,
            "an agent approved an access request"
        );
        let waited = state.jobs.wait(&[job], state.settings.approve_wait).await;
        let job_state = match waited {
            Ok(WaitOutcome::Done(rows)) => rows.first().map(|row| row.state),
            Ok(WaitOutcome::Receipt) | Err(_) => state
                .jobs
                .get(job)
                .await
                .ok()
                .flatten()
                .map(|row| row.state),
        }
        .unwrap_or(JobState::Available);
        let status = access_requests::get(&state.pool, id)
            .await?
            .map_or(RequestStatus::Approved, |row| row.status);
        let mail_state = MailState::of_job(job_state);
        let done = mail_state == MailState::Sent && status == RequestStatus::Replied;
        Ok(json!({
            "request_id": id,
            "status": status.as_str(),
            "mail_state": mail_state.as_str(),
            "mail_job_id": job.0,
            "pending": !done,
        }))
    }
}
