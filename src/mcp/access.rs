//! Access requests as tools: `access_requests.list`, `access_requests.approve`, over the
//! operations the access requests page uses too (`ops::access`).

use rmcp::handler::server::wrapper::Json;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

use super::receipts::Receipt;
use super::{Refusal, Tools};
use crate::ops::access::{AccessRequestList, ApproveAnswer};
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
        title = "List access requests",
        annotations(read_only_hint = true, open_world_hint = false),
        description = "List access requests, newest first, with their status and the state of their approval mail."
    )]
    async fn access_requests_list(
        &self,
        Parameters(params): Parameters<ListRequestsParams>,
    ) -> Result<Json<AccessRequestList>, Refusal> {
        Ok(Json(
            access::list(&self.state, Operator::Agent, params.status.as_deref()).await?,
        ))
    }

    #[tool(
        name = "access_requests.approve",
        title = "Approve an access request",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        ),
        description = "Approve a pending access request: the visitor is mailed an access code. Waits briefly for the mail; if it has not gone out yet the answer says pending:true, and tasks.get with mail_job_id tells when it has.",
        output_schema = rmcp::handler::server::tool::schema_for_output::<ApproveAnswer>()
    )]
    async fn access_requests_approve(
        &self,
        Parameters(params): Parameters<ApproveParams>,
    ) -> Result<Receipt<ApproveAnswer>, Refusal> {
        Ok(Receipt(
            access::approve(&self.state, Operator::Agent, params.id).await?,
        ))
    }
}
