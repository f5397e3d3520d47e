//! The events page's server function: the newest events, of one type or all, a page at
//! a time.

use leptos::prelude::*;
use leptos::server_fn::codec::GetUrl;
use serde::{Deserialize, Serialize};

/// An event as the page shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventView {
    pub id: i64,
    pub event_type: String,
    pub subject_id: Option<i64>,
    pub occurred_at: String,
    /// The data, as indented JSON.
    pub data: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventsView {
    pub events: Vec<EventView>,
    /// Every event type, for the filter.
    pub types: Vec<String>,
    /// The id to ask for older events with (`before`), when there are more.
    pub older_than: Option<i64>,
}

/// How many events the page shows at once.
#[cfg(feature = "ssr")]
pub const EVENTS_PER_PAGE: i64 = 50;

/// The newest events (before `before` when given), of type `event_type` or of all.
#[server(endpoint = "events/page", input = GetUrl)]
pub async fn events_page(
    event_type: Option<String>,
    before: Option<i64>,
) -> Result<EventsView, ServerFnError> {
    server::page(event_type, before).await
}

#[cfg(feature = "ssr")]
mod server {
    use leptos::prelude::*;

    use super::*;
    use crate::api::auth::require_admin;
    use crate::api::replies::reply;
    use crate::api::when;
    use crate::domain::events::{self, EventType};
    use crate::ops::paging::{one_page, parse_filter};

    use crate::state::AppState;

    pub async fn page(
        event_type: Option<String>,
        before: Option<i64>,
    ) -> Result<EventsView, ServerFnError> {
        require_admin().await?;
        let state = expect_context::<AppState>();
        let event_type = parse_filter::<EventType>(event_type.as_deref()).map_err(reply)?;
        let (found, more) = one_page(EVENTS_PER_PAGE, |limit| {
            events::newest(&state.pool, event_type, before, limit)
        })
        .await
        .map_err(reply)?;
        let older_than = more.then(|| found.last().map(|event| event.id)).flatten();
        Ok(EventsView {
            events: found
                .into_iter()
                .map(|event| EventView {
                    id: event.id,
                    event_type: event.event_type,
                    subject_id: event.subject_id,
                    occurred_at: when(event.occurred_at),
                    data: serde_json::to_string_pretty(&event.data).unwrap_or_default(),
                })
                .collect(),
            types: EventType::ALL.map(|t| t.as_str().to_string()).to_vec(),
            older_than,
        })
    }
}
