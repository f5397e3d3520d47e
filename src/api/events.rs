//! The events page over HTTP (admins only), as an adapter of `ops::events`.

use leptos::prelude::*;
use leptos::server_fn::codec::GetUrl;

pub use crate::ops::events::{EventView, EventsView};

/// The newest events (before `before` when given), of type `event_type` or of all.
#[server(endpoint = "events/page", input = GetUrl)]
pub async fn events_page(
    event_type: Option<String>,
    before: Option<i64>,
) -> Result<EventsView, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::events::page(&state, admin, event_type, before)
        .await
        .map_err(crate::api::replies::reply)
}
