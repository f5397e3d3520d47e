//! Webhooks as tools: `webhooks.list`, `webhooks.create`, `webhooks.delete`,
//! `webhooks.test`, over the operations the webhooks pages use too (`ops::webhooks`).

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{ErrorData, tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{Tools, answer};
use crate::ops::{Operator, webhooks};

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CreateWebhookParams {
    /// Where the deliveries go: an http or https URL.
    pub url: String,
    /// The event types it gets, such as ["access_request.created"], or ["*"] for all.
    pub event_types: Vec<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct WebhookIdParams {
    /// The id of the webhook endpoint.
    pub id: i64,
}

#[tool_router(router = webhooks_tools, vis = "pub(super)")]
impl Tools {
    #[tool(
        name = "webhooks.list",
        description = "The webhook endpoints: {webhooks: [{id, url, event_types, enabled, disabled_reason, created_at}]} (never their secrets)."
    )]
    async fn webhooks_list(&self) -> Result<CallToolResult, ErrorData> {
        answer(webhooks::list(&self.state, Operator::Agent).await)
    }

    #[tool(
        name = "webhooks.create",
        description = "Adds a webhook endpoint that gets events of event_types (or [\"*\"] for all) as signed POSTs (Standard Webhooks). Answers {id, url, event_types, enabled, disabled_reason, created_at, secret}; the secret (whsec_…) is shown only now."
    )]
    async fn webhooks_create(
        &self,
        Parameters(params): Parameters<CreateWebhookParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let (url, types) = (&params.url, &params.event_types);
        answer(webhooks::create(&self.state, Operator::Agent, url, types).await)
    }

    #[tool(
        name = "webhooks.delete",
        description = "Deletes a webhook endpoint and its deliveries: {id, deleted: true}."
    )]
    async fn webhooks_delete(
        &self,
        Parameters(params): Parameters<WebhookIdParams>,
    ) -> Result<CallToolResult, ErrorData> {
        answer(webhooks::delete(&self.state, Operator::Agent, params.id).await)
    }

    #[tool(
        name = "webhooks.test",
        description = "Sends a webhook.test message to one endpoint only (not an event), waits up to 5 s, and answers {delivery_job_id, state: sending|delivered|failed, response_status, pending}; pending is true while it is still on its way."
    )]
    async fn webhooks_test(
        &self,
        Parameters(params): Parameters<WebhookIdParams>,
    ) -> Result<CallToolResult, ErrorData> {
        answer(webhooks::send_test(&self.state, Operator::Agent, params.id).await)
    }
}
