//! Events, what happened as the outbox keeps it: the events page reads the newest a
//! page at a time (`api::events`); the tools `events.list` and `events.get` read it
//! oldest first, as a reader catching up does.

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

#[cfg(feature = "ssr")]
pub use operations::*;

#[cfg(feature = "ssr")]
mod operations {
    use crate::error::AppError;
    use crate::ops::Operator;

    use super::*;
    use crate::domain::events::{self, EventType};
    use crate::ops::paging::{one_page, parse_filter};
    use crate::ops::when;

    use crate::state::AppState;

    /// An event, as the tools give it.
    pub use crate::domain::events::Event;

    /// The newest events, of one type or all, a page at a time (before `before`).
    pub async fn page(
        state: &AppState,
        _by: Operator,
        event_type: Option<String>,
        before: Option<i64>,
    ) -> Result<EventsView, AppError> {
        let event_type = parse_filter::<EventType>(event_type.as_deref())?;
        let (found, more) = one_page(EVENTS_PER_PAGE, |limit| {
            events::newest(&state.pool, event_type, before, limit)
        })
        .await?;
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

    /// Events as `events.list` gives them, oldest first: `{"events": [event…],
    /// "next_after_id"}`, the id to ask for the next page with (`null` at the end).
    #[derive(Clone, Debug, serde::Serialize, schemars::JsonSchema)]
    pub struct EventList {
        pub events: Vec<events::Event>,
        pub next_after_id: Option<i64>,
    }

    /// What happened, oldest first, after `after_id`, of one type or all: the outbox
    /// as a reader catches up on it. `limit` is 1 to 1,000 (100 when not given).
    pub async fn list(
        state: &AppState,
        _by: Operator,
        event_type: Option<&str>,
        after_id: Option<i64>,
        limit: Option<i64>,
    ) -> Result<EventList, AppError> {
        let event_type = parse_filter::<EventType>(event_type)?;
        let limit = limit.unwrap_or(100);
        if !(1..=1_000).contains(&limit) {
            return Err(AppError::BadRequest(format!(
                "limit must be from 1 to 1000; it was {limit}."
            )));
        }
        let (events, more) = one_page(limit, |limit| {
            events::list(&state.pool, event_type, after_id, limit)
        })
        .await?;
        let next_after_id = more.then(|| events.last().map(|e| e.id)).flatten();
        Ok(EventList {
            events,
            next_after_id,
        })
    }

    /// One event by id; 404 in words when there is none.
    pub async fn get(state: &AppState, _by: Operator, id: i64) -> Result<events::Event, AppError> {
        events::get(&state.pool, id)
            .await?
            .ok_or_else(|| AppError::NotFound(format!("There is no event {id}.")))
    }
}
