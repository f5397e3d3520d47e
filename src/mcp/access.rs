//! Access requests as tools: `access_requests.list`, `access_requests.approve`, over the
//! operations the access requests page uses too (`ops::access`).

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{ErrorData, tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{Tools, answer};
use crate::ops::{Operator, access};

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
        answer(access::list(&self.state, Operator::Agent, params.status.as_deref()).await)
    }

    #[tool(
        name = "access_requests.approve",
        description = "Approve a pending access request: the visitor is mailed an access code. Waits briefly for the mail; if it has not gone out yet the answer says pending:true, and tasks.get with mail_job_id tells when it has."
    )]
    async fn access_requests_approve(
        &self,
        Parameters(params): Parameters<ApproveParams>,
    ) -> Result<CallToolResult, ErrorData> {
        answer(access::approve(&self.state, Operator::Agent, params.id).await)
    }
}
