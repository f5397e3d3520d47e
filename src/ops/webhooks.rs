//! Webhook endpoints: list, create, enable / disable, delete, send a test; an
//! endpoint's deliveries, and "Redeliver". The webhook pages (`api::webhooks`) and the
//! tools `webhooks.*` answer these views.

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

/// How many deliveries an endpoint's page shows at once.
#[cfg(feature = "ssr")]
pub const DELIVERIES_PER_PAGE: i64 = 50;

#[cfg(feature = "ssr")]
pub use operations::*;

#[cfg(feature = "ssr")]
mod operations {
    use crate::error::AppError;
    use crate::ops::{Done, Operator};

    use super::*;
    use crate::domain::events::EventType;
    use crate::domain::waiting;
    use crate::domain::webhooks::{self, Delivery, Endpoint};
    use crate::ops::paging::one_page;
    use crate::ops::when;
    use crate::state::AppState;

    /// A new endpoint with its secret, as `webhooks.create` gives it.
    pub use crate::domain::webhooks::CreatedEndpoint;

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

    /// How long an agent's test delivery is waited for.
    const AGENT_TEST_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

    /// The endpoints as `webhooks.list` gives them (never their secrets).
    #[derive(Clone, Debug, serde::Serialize, schemars::JsonSchema)]
    pub struct WebhookList {
        pub webhooks: Vec<Endpoint>,
    }

    /// An endpoint gone, with its deliveries.
    #[derive(Clone, Debug, serde::Serialize, schemars::JsonSchema)]
    pub struct Deleted {
        pub id: i64,
        pub deleted: bool,
    }

    /// How a test message fares: on its way (`pending`), delivered or failed.
    #[derive(Clone, Debug, serde::Serialize, schemars::JsonSchema)]
    pub struct TestAnswer {
        pub delivery_job_id: i64,
        pub state: webhooks::DeliveryState,
        pub response_status: Option<i16>,
        pub pending: bool,
        /// The delivery, which the page follows.
        #[serde(skip)]
        pub delivery_id: i64,
    }

    impl From<webhooks::CreatedEndpoint> for CreatedWebhook {
        fn from(created: webhooks::CreatedEndpoint) -> Self {
            CreatedWebhook {
                webhook: view(created.endpoint),
                secret: created.secret,
            }
        }
    }

    /// Every endpoint.
    pub async fn list(state: &AppState, _by: Operator) -> Result<WebhookList, AppError> {
        Ok(WebhookList {
            webhooks: webhooks::list(&state.pool).await?,
        })
    }

    /// The webhooks page: every endpoint, and the event types the form offers.
    pub async fn page(state: &AppState, by: Operator) -> Result<WebhooksView, AppError> {
        let endpoints = list(state, by).await?.webhooks;
        Ok(WebhooksView {
            webhooks: endpoints.into_iter().map(view).collect(),
            event_types: EventType::ALL.map(|t| t.as_str().to_string()).to_vec(),
        })
    }

    /// Adds an endpoint for `event_types` (`*` for all; the page's one field may list
    /// them separated by commas); answers it with its secret, the one time it is shown.
    pub async fn create(
        state: &AppState,
        by: Operator,
        url: &str,
        event_types: &[String],
    ) -> Result<webhooks::CreatedEndpoint, AppError> {
        let created = webhooks::create(
            &state.pool,
            url,
            event_types,
            state.settings.fetch_allow_private,
        )
        .await?;
        tracing::info!(
            webhook.id = created.endpoint.id,
            ?by,
            "a webhook endpoint was added"
        );
        Ok(created)
    }

    /// Enables or disables an endpoint.
    pub async fn set_enabled(
        state: &AppState,
        by: Operator,
        id: i64,
        enabled: bool,
    ) -> Result<String, AppError> {
        webhooks::set_enabled(&state.pool, id, enabled).await?;
        tracing::info!(
            webhook.id = id,
            ?by,
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

    /// Deletes an endpoint and its deliveries.
    pub async fn delete(
        state: &AppState,
        by: Operator,
        id: i64,
    ) -> Result<Done<Deleted>, AppError> {
        webhooks::delete(&state.pool, id).await?;
        tracing::info!(webhook.id = id, ?by, "a webhook endpoint was deleted");
        Ok(Done {
            view: Deleted { id, deleted: true },
            message: "Endpoint deleted, with its deliveries.".into(),
        })
    }

    /// "Send test": a `webhook.test` message to endpoint `id` only. The console answers
    /// at once (its page follows the delivery); an agent waits up to 5 s for it.
    pub async fn send_test(
        state: &AppState,
        by: Operator,
        id: i64,
    ) -> Result<TestAnswer, AppError> {
        let queued = webhooks::send_test(&state.pool, &state.jobs, id).await?;
        if by == Operator::Agent {
            waiting::wait(&state.jobs, &[queued.job_id], AGENT_TEST_WAIT).await?;
        }
        let delivery = webhooks::delivery(&state.pool, queued.delivery_id).await?;
        Ok(TestAnswer {
            delivery_job_id: queued.job_id.0,
            state: delivery.state,
            response_status: delivery.response_status,
            pending: delivery.state == webhooks::DeliveryState::Sending,
            delivery_id: queued.delivery_id,
        })
    }

    /// One delivery, for following it after "Send test".
    pub async fn delivery(
        state: &AppState,
        _by: Operator,
        id: i64,
    ) -> Result<DeliveryView, AppError> {
        let delivery = webhooks::delivery(&state.pool, id).await?;
        Ok(delivery_view(delivery))
    }

    /// An endpoint's page: its circuit, what it has in flight, and its deliveries, a page
    /// at a time.
    pub async fn detail(
        state: &AppState,
        _by: Operator,
        id: i64,
        before: Option<i64>,
    ) -> Result<Option<EndpointPage>, AppError> {
        let endpoint = match webhooks::get(&state.pool, id).await {
            Ok(endpoint) => endpoint,
            Err(webhooks::WebhookError::UnknownEndpoint(_)) => return Ok(None),
            Err(err) => return Err(AppError::from(err)),
        };
        let (deliveries, more) = one_page(DELIVERIES_PER_PAGE, |limit| {
            webhooks::deliveries(&state.pool, id, before, limit)
        })
        .await?;
        let older_than = more.then(|| deliveries.last().map(|d| d.id)).flatten();
        let circuit = webhooks::circuit::circuit(&state.pool, id)
            .await?
            .unwrap_or(webhooks::circuit::Circuit {
                attempts_failed_in_a_row: 0,
                open_until: None,
            });
        let in_flight = webhooks::in_flight::under_way_everywhere(&state.pool, id).await?;
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

    /// "Redeliver": the delivery is tried again now, under its same `webhook-id`.
    pub async fn redeliver(state: &AppState, by: Operator, id: i64) -> Result<String, AppError> {
        let job = webhooks::redeliver(&state.pool, &state.jobs, id).await?;
        tracing::info!(
            delivery.id = id,
            job.id = job.0,
            ?by,
            "a webhook delivery was sent again"
        );
        Ok(format!("Redelivery queued (job {})", job.0))
    }
}
