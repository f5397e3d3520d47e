//! Webhooks as tools: `webhooks.list`, `webhooks.create`, `webhooks.delete`,
//! `webhooks.test`, over the operations the webhooks pages use too (`ops::webhooks`).

use rmcp::handler::server::wrapper::Json;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

use super::receipts::Receipt;
use super::{Refusal, Tools};
use crate::ops::Done;
use crate::ops::webhooks::{CreatedEndpoint, Deleted, TestAnswer, WebhookList};
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
        title = "List webhooks",
        annotations(read_only_hint = true, open_world_hint = false),
        description = "The webhook endpoints (never their secrets)."
    )]
    async fn webhooks_list(&self) -> Result<Json<WebhookList>, Refusal> {
        Ok(Json(webhooks::list(&self.state, Operator::Agent).await?))
    }

    #[tool(
        name = "webhooks.create",
        title = "Add a webhook",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = true
        ),
        description = "Adds a webhook endpoint that gets events of event_types (or [\"*\"] for all) as signed POSTs (Standard Webhooks). The answer's secret (whsec_…) is shown only now."
    )]
    async fn webhooks_create(
        &self,
        Parameters(params): Parameters<CreateWebhookParams>,
    ) -> Result<Json<CreatedEndpoint>, Refusal> {
        let (url, types) = (&params.url, &params.event_types);
        Ok(Json(
            webhooks::create(&self.state, Operator::Agent, url, types).await?,
        ))
    }

    #[tool(
        name = "webhooks.delete",
        title = "Delete a webhook",
        annotations(
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = true,
            open_world_hint = false
        ),
        description = "Deletes a webhook endpoint and its deliveries."
    )]
    async fn webhooks_delete(
        &self,
        Parameters(params): Parameters<WebhookIdParams>,
    ) -> Result<Json<Done<Deleted>>, Refusal> {
        Ok(Json(
            webhooks::delete(&self.state, Operator::Agent, params.id).await?,
        ))
    }

    #[tool(
        name = "webhooks.test",
        title = "Send a test delivery to a webhook",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = true
        ),
        description = "Sends a webhook.test message to one endpoint only (not an event) and waits up to 5 s for it; pending is true while it is still on its way.",
        output_schema = rmcp::handler::server::tool::schema_for_output::<TestAnswer>()
    )]
    async fn webhooks_test(
        &self,
        Parameters(params): Parameters<WebhookIdParams>,
    ) -> Result<Receipt<TestAnswer>, Refusal> {
        Ok(Receipt(
            webhooks::send_test(&self.state, Operator::Agent, params.id).await?,
        ))
    }
}
