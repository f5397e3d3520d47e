//! The overview (`/admin`) over HTTP (admins only), as an adapter of `ops::overview`.

use leptos::prelude::*;
use leptos::server_fn::codec::GetUrl;

pub use crate::ops::overview::{NextBooking, Overview, QueueWaiting};

/// The overview's figures (admins only).
#[server(endpoint = "overview", input = GetUrl)]
pub async fn admin_overview() -> Result<Overview, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::overview::overview(&state, admin)
        .await
        .map_err(crate::api::replies::reply)
}
