//! The queues page over HTTP (admins only), as adapters of `ops::queues`: every queue's
//! figures, and Pause / Resume.

use leptos::prelude::*;
use leptos::server_fn::codec::GetUrl;

pub use crate::ops::queues::QueueView;

/// Every queue, by name.
#[server(endpoint = "queues/list", input = GetUrl)]
pub async fn queues_overview() -> Result<Vec<QueueView>, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::queues::page(&state, admin)
        .await
        .map_err(crate::api::replies::reply)
}

/// "Pause": the queue's jobs wait, in every process, until "Resume".
#[server(endpoint = "queues/pause")]
pub async fn pause_queue(queue: String) -> Result<String, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::queues::set_paused(&state, admin, &queue, true)
        .await
        .map(|done| done.message)
        .map_err(crate::api::replies::reply)
}

/// "Resume": the jobs that waited run at once.
#[server(endpoint = "queues/resume")]
pub async fn resume_queue(queue: String) -> Result<String, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::queues::set_paused(&state, admin, &queue, false)
        .await
        .map(|done| done.message)
        .map_err(crate::api::replies::reply)
}
