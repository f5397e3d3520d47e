//! The webhook pages' server functions: endpoints (create, enable / disable, delete,
//! send a test), an endpoint's deliveries, and "Redeliver".

use leptos::prelude::*;
use leptos::server_fn::codec::GetUrl;
use serde::{Deserialize, Serialize};

/// An endpoint as the pages show it (never its secret).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookView {
    pub id: i64,
    pub url: String,
    pub event_types: Vec<String>,
    pub enabled: bool,
    pub disabled_reason: Option<String>,
    pub created_at: String,
}

/// A new endpoint with its secret: the one answer that carries it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreatedWebhook {
    pub webhook: WebhookView,
    pub secret: String,
}

/// A delivery as the endpoint's page shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryView {
    pub id: i64,
    pub endpoint_id: i64,
    pub event_id: Option<i64>,
    /// The event's type, or `webhook.test`.
    pub message_type: String,
    pub job_id: Option<i64>,
    /// `sending`, `delivered` or `failed`.
    pub state: String,
    pub attempts: i64,
    pub response_status: Option<i16>,
    pub response_excerpt: Option<String>,
    pub duration_ms: Option<i32>,
    pub last_error: Option<String>,
    pub created_at: String,
}

/// An endpoint's circuit breaker and cap on deliveries in flight, as its page shows
/// them (`domain::webhooks::circuit`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CircuitView {
    /// `closed` or `open`.
    pub state: String,
    /// What it means, in a sentence.
    pub words: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointPage {
    pub webhook: WebhookView,
    pub circuit: CircuitView,
    /// Its deliveries being attempted now (every copy), and what caps them, in words.
    pub in_flight: i64,
    pub in_flight_words: String,
    pub deliveries: Vec<DeliveryView>,
    /// The id to ask for older deliveries with (`before`), when there are more.
    pub older_than: Option<i64>,
}

/// A test message on its way.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestSent {
    pub delivery_id: i64,
    pub job_id: i64,
}

/// The webhooks page: every endpoint, and the event types the form offers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhooksView {
    pub webhooks: Vec<WebhookView>,
    pub event_types: Vec<String>,
}

/// Every endpoint, oldest first.
#[server(endpoint = "webhooks/list", input = GetUrl)]
pub async fn webhooks_overview() -> Result<WebhooksView, ServerFnError> {
    server::overview().await
}

/// Adds an endpoint; `event_types` is `*` or type names separated by commas.
#[server(endpoint = "webhooks/create")]
pub async fn create_webhook(
    url: String,
    event_types: String,
) -> Result<CreatedWebhook, ServerFnError> {
    server::create(url, event_types).await
}

#[server(endpoint = "webhooks/set_enabled")]
pub async fn set_webhook_enabled(id: i64, enabled: bool) -> Result<String, ServerFnError> {
    server::set_enabled(id, enabled).await
}

#[server(endpoint = "webhooks/delete")]
pub async fn delete_webhook(id: i64) -> Result<String, ServerFnError> {
    server::delete(id).await
}

/// "Send test": queues a `webhook.test` message to endpoint `id` only.
#[server(endpoint = "webhooks/test")]
pub async fn send_webhook_test(id: i64) -> Result<TestSent, ServerFnError> {
    server::send_test(id).await
}

/// One delivery, for following it after "Send test".
#[server(endpoint = "webhooks/delivery", input = GetUrl)]
pub async fn webhook_delivery(id: i64) -> Result<DeliveryView, ServerFnError> {
    server::delivery(id).await
}

/// An endpoint and its newest deliveries (before delivery `before` when given).
#[server(endpoint = "webhooks/detail", input = GetUrl)]
pub async fn webhook_detail(
    id: i64,
    before: Option<i64>,
) -> Result<Option<EndpointPage>, ServerFnError> {
    server::detail(id, before).await
}

/// "Redeliver": delivery `id` goes out again now.
#[server(endpoint = "webhooks/redeliver")]
pub async fn redeliver_webhook(id: i64) -> Result<String, ServerFnError> {
    server::redeliver(id).await
}

/// How many deliveries an endpoint's page shows at once.
#[cfg(feature = "ssr")]
pub const DELIVERIES_PER_PAGE: i64 = 50;

#[cfg(feature = "ssr")]
mod server {
    use leptos::prelude::*;

    use super::*;
    use crate::api::auth::require_admin;
    use crate::api::replies::reply;
    use crate::api::when;
    use crate::domain::events::EventType;
    use crate::domain::webhooks::{self, Delivery, Endpoint};
    use crate::ops::paging::one_page;
    use crate::state::AppState;

    fn circuit_view(circuit: &webhooks::circuit::Circuit) -> CircuitView {
        use webhooks::circuit::OPEN_AFTER;
        let failed = circuit.attempts_failed_in_a_row;
        match circuit.open_until {
            Some(until) => CircuitView {
                state: "open".into(),
                words: format!(
                    "Circuit open until {}: {failed} attempts failed in a row, so its deliveries wait without spending attempts; then one of them tries. \"Send test\" goes through now.",
                    when(until)
                ),
            },
            None => CircuitView {
                state: "closed".into(),
                words: if failed == 0 {
                    "Circuit closed: deliveries go out as they come.".to_string()
                } else {
                    format!(
                        "Circuit closed: {failed} attempts failed in a row (it opens at {OPEN_AFTER})."
                    )
                },
            },
        }
    }

    fn view(endpoint: Endpoint) -> WebhookView {
        WebhookView {
            id: endpoint.id,
            url: endpoint.url,
            event_types: endpoint.event_types,
            enabled: endpoint.enabled,
            disabled_reason: endpoint.disabled_reason,
            created_at: when(endpoint.created_at),
        }
    }

    fn delivery_view(delivery: Delivery) -> DeliveryView {
        DeliveryView {
            id: delivery.id,
            endpoint_id: delivery.endpoint_id,
            event_id: delivery.event_id,
            message_type: delivery.message_type,
            job_id: delivery.job_id,
            state: delivery.state.as_str().into(),
            attempts: delivery.attempts,
            response_status: delivery.response_status,
            response_excerpt: delivery.response_excerpt,
            duration_ms: delivery.duration_ms,
            last_error: delivery.last_error,
            created_at: when(delivery.created_at),
        }
    }

    pub async fn overview() -> Result<WebhooksView, ServerFnError> {
        require_admin().await?;
        let state = expect_context::<AppState>();
        let endpoints = webhooks::list(&state.pool).await.map_err(reply)?;
        Ok(WebhooksView {
            webhooks: endpoints.into_iter().map(view).collect(),
            event_types: EventType::ALL.map(|t| t.as_str().to_string()).to_vec(),
        })
    }

    pub async fn create(url: String, event_types: String) -> Result<CreatedWebhook, ServerFnError> {
        let admin = require_admin().await?;
        let state = expect_context::<AppState>();
        let created = webhooks::create(
            &state.pool,
            &url,
            &[event_types],
            state.settings.fetch_allow_private,
        )
        .await
        .map_err(reply)?;
        tracing::info!(
            webhook.id = created.endpoint.id,
            admin.id = admin.id,
            "a webhook endpoint was added"
        );
        Ok(CreatedWebhook {
            webhook: view(created.endpoint),
            secret: created.secret,
        })
    }

    pub async fn set_enabled(id: i64, enabled: bool) -> Result<String, ServerFnError> {
        let admin = require_admin().await?;
        let state = expect_context::<AppState>();
        webhooks::set_enabled(&state.pool, id, enabled)
            .await
            .map_err(reply)?;
        tracing::info!(
            webhook.id = id,
            admin.id = admin.id,
            enabled,
            "a webhook endpoint was switched"
        );
        Ok(if enabled {
            "Endpoint enabled: new events go to it again."
        } else {
            "Endpoint disabled: new events skip it."
        }
        .into())
    }

    pub async fn delete(id: i64) -> Result<String, ServerFnError> {
        let admin = require_admin().await?;
        let state = expect_context::<AppState>();
        webhooks::delete(&state.pool, id).await.map_err(reply)?;
        tracing::info!(
            webhook.id = id,
            admin.id = admin.id,
            "a webhook endpoint was deleted"
        );
        Ok("Endpoint deleted, with its deliveries.".into())
    }

    pub async fn send_test(id: i64) -> Result<TestSent, ServerFnError> {
        require_admin().await?;
        let state = expect_context::<AppState>();
        let queued = webhooks::send_test(&state.pool, &state.jobs, id)
            .await
            .map_err(reply)?;
        Ok(TestSent {
            delivery_id: queued.delivery_id,
            job_id: queued.job_id.0,
        })
    }

    pub async fn delivery(id: i64) -> Result<DeliveryView, ServerFnError> {
        require_admin().await?;
        let state = expect_context::<AppState>();
        let delivery = webhooks::delivery(&state.pool, id).await.map_err(reply)?;
        Ok(delivery_view(delivery))
    }

    pub async fn detail(
        id: i64,
        before: Option<i64>,
    ) -> Result<Option<EndpointPage>, ServerFnError> {
        require_admin().await?;
        let state = expect_context::<AppState>();
        let endpoint = match webhooks::get(&state.pool, id).await {
            Ok(endpoint) => endpoint,
            Err(webhooks::WebhookError::UnknownEndpoint(_)) => return Ok(None),
            Err(err) => return Err(reply(err)),
        };
        let (deliveries, more) = one_page(DELIVERIES_PER_PAGE, |limit| {
            webhooks::deliveries(&state.pool, id, before, limit)
        })
        .await
        .map_err(reply)?;
        let older_than = more.then(|| deliveries.last().map(|d| d.id)).flatten();
        let circuit = webhooks::circuit::circuit(&state.pool, id)
            .await
            .map_err(reply)?
            .unwrap_or(webhooks::circuit::Circuit {
                attempts_failed_in_a_row: 0,
                open_until: None,
            });
        let in_flight = webhooks::in_flight::under_way_everywhere(&state.pool, id)
            .await
            .map_err(reply)?;
        let in_flight_words = format!(
            "Deliveries under way: {in_flight}. Until it answers within {} ms it gets at most {} at once in each StandMeet process; the others wait without spending attempts.",
            state.settings.webhook_timeout.as_millis() / 2,
            webhooks::in_flight::UNPROVEN_IN_FLIGHT
        );
        Ok(Some(EndpointPage {
            webhook: view(endpoint),
            circuit: circuit_view(&circuit),
            in_flight,
            in_flight_words,
            deliveries: deliveries.into_iter().map(delivery_view).collect(),
            older_than,
        }))
    }

    pub async fn redeliver(id: i64) -> Result<String, ServerFnError> {
        let admin = require_admin().await?;
        let state = expect_context::<AppState>();
        let job = webhooks::redeliver(&state.pool, &state.jobs, id)
            .await
            .map_err(reply)?;
        tracing::info!(
            delivery.id = id,
            job.id = job.0,
            admin.id = admin.id,
            "a webhook delivery was sent again"
        );
        Ok(format!("Redelivery queued (job {})", job.0))
    }
}
