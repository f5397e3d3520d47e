//! Webhooks as tools: `webhooks.list`, `webhooks.create`, `webhooks.delete`,
//! `webhooks.test` (as `api::webhooks`).

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{ErrorData, tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Tools, respond};
use crate::domain::webhooks;
use crate::error::AppError;

/// How long `webhooks.test` waits for its delivery.
const WEBHOOK_TEST_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

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
        let listed = webhooks::list(&self.state.pool).await;
        respond(
            listed
                .map(|endpoints| json!({ "webhooks": endpoints }))
                .map_err(AppError::from),
        )
    }

    #[tool(
        name = "webhooks.create",
        description = "Adds a webhook endpoint that gets events of event_types (or [\"*\"] for all) as signed POSTs (Standard Webhooks). Answers {id, url, event_types, enabled, disabled_reason, created_at, secret}; the secret (whsec_…) is shown only now."
    )]
    async fn webhooks_create(
        &self,
        Parameters(params): Parameters<CreateWebhookParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let created = webhooks::create(
            &self.state.pool,
            &params.url,
            &params.event_types,
            self.state.settings.fetch_allow_private,
        )
        .await;
        respond(
            created
                .map(|created| json!(created))
                .map_err(AppError::from),
        )
    }

    #[tool(
        name = "webhooks.delete",
        description = "Deletes a webhook endpoint and its deliveries: {id, deleted: true}."
    )]
    async fn webhooks_delete(
        &self,
        Parameters(params): Parameters<WebhookIdParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let deleted = webhooks::delete(&self.state.pool, params.id).await;
        respond(
            deleted
                .map(|()| json!({ "id": params.id, "deleted": true }))
                .map_err(AppError::from),
        )
    }

    #[tool(
        name = "webhooks.test",
        description = "Sends a webhook.test message to one endpoint only (not an event), waits up to 5 s, and answers {delivery_job_id, state: sending|delivered|failed, response_status, pending}; pending is true while it is still on its way."
    )]
    async fn webhooks_test(
        &self,
        Parameters(params): Parameters<WebhookIdParams>,
    ) -> Result<CallToolResult, ErrorData> {
        respond(self.send_test(params.id).await)
    }
}

impl Tools {
    /// `webhooks.test`: queues a test delivery, waits up to [`WEBHOOK_TEST_WAIT`] for
    /// it, and says how it went.
    async fn send_test(&self, id: i64) -> Result<Value, AppError> {
        let queued = webhooks::send_test(&self.state.pool, &self.state.jobs, id).await?;
        self.state
            .jobs
            .wait(&[queued.job_id], WEBHOOK_TEST_WAIT)
            .await?;
        let delivery = webhooks::delivery(&self.state.pool, queued.delivery_id).await?;
        Ok(json!({
            "delivery_job_id": queued.job_id.0,
            "state": delivery.state,
            "response_status": delivery.response_status,
            "pending": delivery.state == webhooks::DeliveryState::Sending,
        }))
    }
}
