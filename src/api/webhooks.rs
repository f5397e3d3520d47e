//! The webhook pages over HTTP (admins only), as adapters of `ops::webhooks`.

use leptos::prelude::*;
use leptos::server_fn::codec::GetUrl;

pub use crate::ops::webhooks::{
    CreatedWebhook, DeliveryView, EndpointPage, TestSent, WebhookView, WebhooksView,
};

/// Every endpoint, oldest first.
#[server(endpoint = "webhooks/list", input = GetUrl)]
pub async fn webhooks_overview() -> Result<WebhooksView, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::webhooks::page(&state, admin)
        .await
        .map_err(crate::api::replies::reply)
}

/// Adds an endpoint; `event_types` is `*` or type names separated by commas.
#[server(endpoint = "webhooks/create")]
pub async fn create_webhook(
    url: String,
    event_types: String,
) -> Result<CreatedWebhook, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::webhooks::create(&state, admin, &url, &[event_types])
        .await
        .map(CreatedWebhook::from)
        .map_err(crate::api::replies::reply)
}

#[server(endpoint = "webhooks/set_enabled")]
pub async fn set_webhook_enabled(id: i64, enabled: bool) -> Result<String, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::webhooks::set_enabled(&state, admin, id, enabled)
        .await
        .map_err(crate::api::replies::reply)
}

#[server(endpoint = "webhooks/delete")]
pub async fn delete_webhook(id: i64) -> Result<String, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::webhooks::delete(&state, admin, id)
        .await
        .map(|done| done.message)
        .map_err(crate::api::replies::reply)
}

/// "Send test": queues a `webhook.test` message to endpoint `id` only.
#[server(endpoint = "webhooks/test")]
pub async fn send_webhook_test(id: i64) -> Result<TestSent, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::webhooks::send_test(&state, admin, id)
        .await
        .map(|sent| TestSent {
            delivery_id: sent.delivery_id,
            job_id: sent.delivery_job_id,
        })
        .map_err(crate::api::replies::reply)
}

/// One delivery, for following it after "Send test".
#[server(endpoint = "webhooks/delivery", input = GetUrl)]
pub async fn webhook_delivery(id: i64) -> Result<DeliveryView, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::webhooks::delivery(&state, admin, id)
        .await
        .map_err(crate::api::replies::reply)
}

/// An endpoint and its newest deliveries (before delivery `before` when given).
#[server(endpoint = "webhooks/detail", input = GetUrl)]
pub async fn webhook_detail(
    id: i64,
    before: Option<i64>,
) -> Result<Option<EndpointPage>, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::webhooks::detail(&state, admin, id, before)
        .await
        .map_err(crate::api::replies::reply)
}

/// "Redeliver": delivery `id` goes out again now.
#[server(endpoint = "webhooks/redeliver")]
pub async fn redeliver_webhook(id: i64) -> Result<String, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::webhooks::redeliver(&state, admin, id)
        .await
        .map_err(crate::api::replies::reply)
}
